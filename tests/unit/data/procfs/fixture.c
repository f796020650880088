/* SPDX-License-Identifier: Apache-2.0 */
/* Build-id fixture: linked with a fixed --build-id by lib/procfs/meson.build. */
int main(void)
{
	return 0;
}
