/* A plugin that claims ABI version 2 with only v1's entry point: loading it must fail with a clear
 * reason. */
#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return 2; }
int32_t attncheck_forward_f32(const attncheck_problem *p) { return p ? 0 : 1; }
