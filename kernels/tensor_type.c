/*
 * The tensor type table (see tensor_type.h): every type ggml numbers, the
 * ones the kernels support with their block layout, and the names of
 * ik_llama.cpp's own numbers (refused, named in the message).
 *
 * defines: ggml_type_block, ggml_type_size, ggml_type_name, ggml_row_size
 */
#include "tensor_type.h"

#include <stddef.h>


typedef struct {
    const char *name;
    uint32_t    block;          /* elements per block; 0 = unsupported */
    uint32_t    size;           /* bytes per block */
} ggml_type_info;

static const ggml_type_info ggml_types[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32]  = { "F32",  1,   4 },
    [GGML_TYPE_F16]  = { "F16",  1,   2 },
    [GGML_TYPE_Q4_0] = { "Q4_0", 32,  18 },
    [GGML_TYPE_Q4_1] = { "Q4_1", 32,  20 },
    [4]              = { "Q4_2 (removed)", 0, 0 },
    [5]              = { "Q4_3 (removed)", 0, 0 },
    [GGML_TYPE_Q5_0] = { "Q5_0", 32,  22 },
    [GGML_TYPE_Q5_1] = { "Q5_1", 32,  24 },
    [GGML_TYPE_Q8_0] = { "Q8_0", 32,  34 },
    [GGML_TYPE_Q8_1] = { "Q8_1", 0,   0 },
    [GGML_TYPE_Q2_K] = { "Q2_K", 256, 84 },
    [GGML_TYPE_Q3_K] = { "Q3_K", 256, 110 },
    [GGML_TYPE_Q4_K] = { "Q4_K", 256, 144 },
    [GGML_TYPE_Q5_K] = { "Q5_K", 256, 176 },
    [GGML_TYPE_Q6_K] = { "Q6_K", 256, 210 },
    [GGML_TYPE_Q8_K] = { "Q8_K", 0,   0 },
    [16]             = { "IQ2_XXS", 0, 0 },
    [17]             = { "IQ2_XS", 0,  0 },
    [18]             = { "IQ3_XXS", 0, 0 },
    [19]             = { "IQ1_S", 0,   0 },
    [GGML_TYPE_IQ4_NL] = { "IQ4_NL", 32, 18 },
    [21]             = { "IQ3_S", 0,   0 },
    [22]             = { "IQ2_S", 0,   0 },
    [GGML_TYPE_IQ4_XS] = { "IQ4_XS", 256, 136 },
    [24]             = { "I8", 0,      0 },
    [25]             = { "I16", 0,     0 },
    [26]             = { "I32", 0,     0 },
    [27]             = { "I64", 0,     0 },
    [28]             = { "F64", 0,     0 },
    [29]             = { "IQ1_M", 0,   0 },
    [GGML_TYPE_BF16] = { "BF16", 1,   2 },
    [31]             = { "Q4_0_4_4 (removed)", 0, 0 },
    [32]             = { "Q4_0_4_8 (removed)", 0, 0 },
    [33]             = { "Q4_0_8_8 (removed)", 0, 0 },
    [34]             = { "TQ1_0", 0,   0 },
    [35]             = { "TQ2_0", 0,   0 },
    [36]             = { "IQ4_NL_4_4 (removed)", 0, 0 },
    [37]             = { "IQ4_NL_4_8 (removed)", 0, 0 },
    [38]             = { "IQ4_NL_8_8 (removed)", 0, 0 },
    [GGML_TYPE_MXFP4] = { "MXFP4", 32, 17 },
    [40]             = { "NVFP4", 0,   0 },
    [41]             = { "Q1_0", 0,    0 },
};


uint32_t
ggml_type_block(uint32_t type)
{
    return type < GGML_TYPE_COUNT ? ggml_types[type].block : 0;
}


uint32_t
ggml_type_size(uint32_t type)
{
    return type < GGML_TYPE_COUNT ? ggml_types[type].size : 0;
}


/* ik_llama.cpp's types, numbered past ggml's (its ggml.h): files its
 * quantizer writes in some mixes; none is supported, the names are for
 * the refusal */
static const struct {
    uint32_t     type;
    const char  *name;
} ik_types[] = {
    { 97, "Q8_0_X4 (ik_llama.cpp)" },    { 98, "Q8_1_X4 (ik_llama.cpp)" },
    { 99, "Q8_2_X4 (ik_llama.cpp)" },    { 133, "Q6_0 (ik_llama.cpp)" },
    { 134, "IQ1_BN (ik_llama.cpp)" },    { 135, "IQ2_BN (ik_llama.cpp)" },
    { 136, "Q8_K64 (ik_llama.cpp)" },    { 137, "IQ2_K (ik_llama.cpp)" },
    { 138, "IQ3_K (ik_llama.cpp)" },     { 139, "IQ4_K (ik_llama.cpp)" },
    { 140, "IQ5_K (ik_llama.cpp)" },     { 141, "IQ6_K (ik_llama.cpp)" },
    { 144, "IQ4_KS (ik_llama.cpp)" },    { 145, "IQ2_KS (ik_llama.cpp)" },
    { 146, "IQ4_KSS (ik_llama.cpp)" },   { 147, "Q8_K16 (ik_llama.cpp)" },
    { 148, "Q8_K32 (ik_llama.cpp)" },    { 149, "Q8_KR8 (ik_llama.cpp)" },
    { 150, "Q8_K128 (ik_llama.cpp)" },   { 151, "Q8_KV (ik_llama.cpp)" },
    { 152, "IQ5_KS (ik_llama.cpp)" },    { 153, "IQ2_KT (ik_llama.cpp)" },
    { 154, "IQ3_KT (ik_llama.cpp)" },    { 155, "IQ4_KT (ik_llama.cpp)" },
    { 156, "IQ3_KS (ik_llama.cpp)" },    { 157, "IQ2_KL (ik_llama.cpp)" },
    { 158, "IQ1_KT (ik_llama.cpp)" },    { 202, "Q4_0_R8 (ik_llama.cpp)" },
    { 206, "Q5_0_R4 (ik_llama.cpp)" },   { 208, "Q8_0_R8 (ik_llama.cpp)" },
    { 210, "Q2_K_R4 (ik_llama.cpp)" },   { 211, "Q3_K_R4 (ik_llama.cpp)" },
    { 212, "Q4_K_R4 (ik_llama.cpp)" },   { 213, "Q5_K_R4 (ik_llama.cpp)" },
    { 214, "Q6_K_R4 (ik_llama.cpp)" },   { 216, "IQ2_XXS_R4 (ik_llama.cpp)" },
    { 217, "IQ2_XS_R4 (ik_llama.cpp)" }, { 218, "IQ3_XXS_R4 (ik_llama.cpp)" },
    { 219, "IQ1_S_R4 (ik_llama.cpp)" },  { 220, "IQ4_NL_R4 (ik_llama.cpp)" },
    { 221, "IQ3_S_R4 (ik_llama.cpp)" },  { 222, "IQ2_S_R4 (ik_llama.cpp)" },
    { 223, "IQ4_XS_R8 (ik_llama.cpp)" }, { 229, "IQ1_M_R4 (ik_llama.cpp)" },
    { 230, "BF16_R16 (ik_llama.cpp)" },  { 233, "Q6_0_R4 (ik_llama.cpp)" },
    { 335, "IQ2_BN_R4 (ik_llama.cpp)" }, { 337, "IQ2_K_R4 (ik_llama.cpp)" },
    { 338, "IQ3_K_R4 (ik_llama.cpp)" },  { 339, "IQ4_K_R4 (ik_llama.cpp)" },
    { 340, "IQ5_K_R4 (ik_llama.cpp)" },  { 344, "IQ4_KS_R4 (ik_llama.cpp)" },
    { 352, "IQ5_KS_R4 (ik_llama.cpp)" }, { 353, "MXFP4_R8 (ik_llama.cpp)" },
    { 397, "Q8_K_R16 (ik_llama.cpp)" },  { 398, "Q8_KV_R8 (ik_llama.cpp)" },
    { 399, "Q8_K_R8 (ik_llama.cpp)" },
};


const char *
ggml_type_name(uint32_t type)
{
    size_t  i;

    if (type < GGML_TYPE_COUNT && ggml_types[type].name != NULL) {
        return ggml_types[type].name;
    }
    for (i = 0; i < sizeof(ik_types) / sizeof(ik_types[0]); i++) {
        if (ik_types[i].type == type) {
            return ik_types[i].name;
        }
    }
    return "unknown";
}


uint64_t
ggml_row_size(uint32_t type, uint64_t n)
{
    uint32_t block = ggml_type_block(type);

    if (block == 0 || n % block != 0) {
        return 0;
    }
    return n / block * ggml_type_size(type);
}
