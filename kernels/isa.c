/*
 * The instruction set the kernels run: the best this CPU has (cpuid),
 * lowered by LLM_ISA or by a test, chosen once.
 */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "isa.h"


static int isa_current = -1;


/* F16C by cpuid (leaf 1, ecx bit 29): clang's __builtin_cpu_supports does
 * not know the name */
static int
has_f16c(void)
{
#if defined(__x86_64__)
    unsigned eax, ebx, ecx, edx;

    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return (ecx >> 29) & 1;
    }
#endif
    return 0;
}


static int
isa_max(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")
        || !has_f16c())
    {
        return LLM_ISA_SCALAR;
    }
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl")
        && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("avx512vnni"))
    {
        return LLM_ISA_AVX512;
    }
    return LLM_ISA_AVX2;
#else
    return LLM_ISA_SCALAR;
#endif
}


int
llm_kernels_isa(void)
{
    if (isa_current < 0) {
        int isa = isa_max();
        const char *env = getenv("LLM_ISA");
        for (int i = 0; env && i < isa; i++) {
            if (strcmp(env, llm_kernels_isa_name(i)) == 0) {
                isa = i;
            }
        }
        isa_current = isa;
    }
    return isa_current;
}


const char *
llm_kernels_isa_name(int isa)
{
    switch (isa) {
    case LLM_ISA_AVX2:   return "avx2";
    case LLM_ISA_AVX512: return "avx512";
    default:             return "scalar";
    }
}


int
llm_kernels_set_isa(int isa)
{
    if (isa < 0 || isa > isa_max()) {
        return -1;
    }
    isa_current = isa;
    return 0;
}
