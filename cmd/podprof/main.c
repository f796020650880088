/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include "podprof-config.h"
int main(void)
{
	printf("podprof %s\n", PODPROF_VERSION);
	return 0;
}
