/* A plugin with the right version but without the required attncheck_forward_f32. */
#include "attncheck/plugin.h"

int32_t attncheck_abi_version(void) { return ATTNCHECK_ABI_VERSION; }
