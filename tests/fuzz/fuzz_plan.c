/* fuzz_plan.c: libFuzzer target for the plan loader. Any byte string must be
 * either accepted as a fully verified plan or rejected with an error: no
 * crash, leak, hang or undefined behaviour (built with ASan+UBSan). */
#include <stddef.h>
#include <stdint.h>

#include "../../runtime/pprt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pprt_plan *p = NULL;
    pp_err err = {0};
    if (pprt_plan_load_mem(data, size, &p, &err) == PP_OK) pprt_plan_free(p);
    return 0;
}
