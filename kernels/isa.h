/*
 * The instruction set every CPU kernel dispatches on (matmul, attention,
 * norm, rope, activations, packing): scalar, AVX2 or AVX-512.
 *
 * defines: LLM_ISA_*, llm_kernels_isa, llm_kernels_isa_name,
 *          llm_kernels_set_isa
 */
#ifndef NGX_LLM_ISA_H
#define NGX_LLM_ISA_H

/* the instruction set the kernels use: chosen once from the CPU (the
 * environment variable LLM_ISA=scalar|avx2|avx512 can lower it) */
enum { LLM_ISA_SCALAR = 0, LLM_ISA_AVX2 = 1, LLM_ISA_AVX512 = 2 };
int llm_kernels_isa(void);
const char *llm_kernels_isa_name(int isa);
/* for tests and benches: 0, or -1 if this CPU cannot run isa */
int llm_kernels_set_isa(int isa);

#endif
