/*
 * IEEE half and bfloat16 to and from float (fp16.h), exactly.
 *
 * defines: llm_fp16_to_fp32, llm_fp32_to_fp16, llm_bf16_to_fp32
 */
#include <string.h>

#include "fp16.h"


float
llm_fp16_to_fp32(llm_half h)
{
    uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    float f;

    if (exp == 0x1f) {                       /* inf / nan */
        bits = sign | 0x7f800000 | (man << 13);
    } else if (exp != 0) {                   /* normal */
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {                   /* signed zero */
        bits = sign;
    } else {                                 /* subnormal: man * 2^-24 */
        f = (float) man * 0x1p-24f;
        return sign ? -f : f;
    }
    memcpy(&f, &bits, 4);
    return f;
}


llm_half
llm_fp32_to_fp16(float f)
{
    uint32_t bits, sign, man, lsb;
    int exp;

    memcpy(&bits, &f, 4);
    sign = (bits >> 16) & 0x8000;
    exp = (int) ((bits >> 23) & 0xff) - 127 + 15;
    man = bits & 0x7fffff;

    if (((bits >> 23) & 0xff) == 0xff) {     /* inf / nan (keep it a nan) */
        return (llm_half) (sign | 0x7c00 | (man ? 0x200 : 0));
    }
    if (exp >= 0x1f) {                       /* overflow */
        return (llm_half) (sign | 0x7c00);
    }
    if (exp <= 0) {                          /* subnormal or zero */
        if (exp < -10) {
            return (llm_half) sign;
        }
        man |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) {
            half++;
        }
        return (llm_half) (sign | half);
    }
    /* normal: round the 13 dropped bits to nearest even; a carry into the
     * exponent is the correct result (also up to inf) */
    lsb = (man >> 13) & 1;
    man += 0xfff + lsb;
    if (man & 0x800000) {
        man = 0;
        exp++;
        if (exp >= 0x1f) {
            return (llm_half) (sign | 0x7c00);
        }
    }
    return (llm_half) (sign | ((uint32_t) exp << 10) | (man >> 13));
}


float
llm_bf16_to_fp32(uint16_t h)
{
    uint32_t bits = (uint32_t) h << 16;
    float f;

    memcpy(&f, &bits, 4);
    return f;
}
