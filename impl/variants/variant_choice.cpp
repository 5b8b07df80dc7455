// One plugin's variant: the build defines ATTNCHECK_FORWARD (and ATTNCHECK_BACKWARD) as names.
#include "variant_choice.hpp"

#define ATTNCHECK_STRING(x) ATTNCHECK_STRING_(x)
#define ATTNCHECK_STRING_(x) #x
#ifndef ATTNCHECK_BACKWARD
#define ATTNCHECK_BACKWARD flash_backward
#endif

const attncheck::VariantChoice attncheck::kVariantChoice{ATTNCHECK_STRING(ATTNCHECK_FORWARD),
                                                         ATTNCHECK_STRING(ATTNCHECK_BACKWARD)};
