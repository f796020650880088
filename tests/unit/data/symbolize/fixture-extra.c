/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A second compilation unit for sym-fixture-mixed: built by gcc (which
 * describes it in .debug_aranges) and linked with fixture.c built by clang
 * (which does not), so the file's .debug_aranges covers only this unit.
 */
__attribute__((noinline)) int pp_fix_extra(int x);
__attribute__((noinline)) int pp_fix_extra(int x)
{
	return x * 5 + 2;
}
