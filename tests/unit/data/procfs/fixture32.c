/* SPDX-License-Identifier: Apache-2.0 */
/* ELF32 build-id fixture: compiled -m32 -ffreestanding and linked by ld -m elf_i386. */
void _start(void);
void _start(void)
{
	for (;;)
		;
}
