/* isa.c: see isa.h. */
#include "isa.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static pprt_isa hw_isa(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return PPRT_ISA_BASE;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return PPRT_ISA_AVX512;
    return PPRT_ISA_AVX2;
#else
    return PPRT_ISA_BASE;
#endif
}

/* The cap variable's value in upper case ("" where unset), cut at 31. */
static void cap_name(char u[32]) {
    const char *v = getenv("ONEDNN_MAX_CPU_ISA");
    if (!v || !*v) v = getenv("DNNL_MAX_CPU_ISA");
    size_t n = 0;
    for (; v && v[n] && n < 31; n++) u[n] = (char)toupper((unsigned char)v[n]);
    u[n] = 0;
}

/* The highest ISA the cap allows (oneDNN's names, any case): AVX512_* and
 * AVX10_* leave AVX-512; AVX2 and AVX2_VNNI* stop at AVX2; SSE41 and AVX at
 * the base; ALL, DEFAULT, unset or unknown: no cap. */
static pprt_isa cap_isa(void) {
    char u[32];
    cap_name(u);
    if (!*u) return PPRT_ISA_AVX512;
    if (!strncmp(u, "AVX512", 6) || !strncmp(u, "AVX10", 5)) return PPRT_ISA_AVX512;
    if (!strncmp(u, "AVX2", 4)) return PPRT_ISA_AVX2;
    if (!strcmp(u, "SSE41") || !strcmp(u, "AVX")) return PPRT_ISA_BASE;
    return PPRT_ISA_AVX512;
}

static int cached = -1, capped = 0;

pprt_isa pprt_cpu_isa(void) {
    if (cached < 0) { /* benign race: every thread computes the same */
        const pprt_isa hw = hw_isa(), cap = cap_isa();
        capped = cap < hw;
        cached = (int)(cap < hw ? cap : hw);
    }
    return (pprt_isa)cached;
}

bool pprt_isa_capped(void) {
    (void)pprt_cpu_isa();
    return capped;
}

bool pprt_cpu_avx512bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    static int has = -1; /* benign race: every thread computes the same */
    if (has < 0) has = __builtin_cpu_supports("avx512bf16");
    return has;
#else
    return false;
#endif
}

bool pprt_cpu_f16c(void) {
#if defined(__x86_64__) || defined(__i386__)
    static int has = -1; /* benign race: every thread computes the same */
    unsigned a, b, c, d; /* CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports knows no "f16c") */
    if (has < 0) has = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
    return has;
#else
    return false;
#endif
}

bool pprt_isa_amx_allowed(void) {
    char u[32];
    cap_name(u);
    return !*u || !strcmp(u, "ALL") || !strcmp(u, "DEFAULT") || strstr(u, "AMX") != NULL;
}

const char *pprt_isa_name(pprt_isa isa) {
    switch (isa) {
    case PPRT_ISA_AVX512: return "avx512";
    case PPRT_ISA_AVX2: return "avx2";
    case PPRT_ISA_BASE: break;
    }
    return "base";
}
