/* SPDX-License-Identifier: Apache-2.0 */
#ifndef PODPROF_STORE_H
#define PODPROF_STORE_H
#endif
