/*
 * UTF-8, the one home of its rules: what a valid sequence is (RFC 3629:
 * no overlongs, no surrogates, nothing past U+10FFFF), its length, a code
 * point to bytes and back, and where a text cut at a byte count ends
 * without splitting a character. Everything that reads or writes UTF-8
 * byte by byte (tokenizers, Jinja, the API, the grammar, the nginx
 * module) uses these; no layer below, none of engine/ or the module's.
 *
 * defines: LLM_UTF8_VALID, LLM_UTF8_INCOMPLETE, LLM_UTF8_INVALID,
 *          llm_utf8_check, llm_utf8_len, llm_utf8_valid, llm_utf8_lead_len,
 *          llm_utf8_encode, llm_utf8_decode, llm_utf8_cut
 */
#ifndef NGX_LLM_UTF8_H
#define NGX_LLM_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* what llm_utf8_check finds at the start of a text */
enum {
    LLM_UTF8_VALID = 0,         /* *n: the sequence's length */
    LLM_UTF8_INCOMPLETE,        /* a valid start cut short by the end */
    LLM_UTF8_INVALID            /* *n: the maximal invalid subpart (>= 1),
                                   what one U+FFFD replaces (WHATWG) */
};

/* the sequence at s (len >= 1 bytes): VALID, INCOMPLETE or INVALID, with
 * its length in *n */
int llm_utf8_check(const unsigned char *s, size_t len, size_t *n);

/* length of the valid UTF-8 sequence at p, or 0 when it is not one (cut
 * short included); avail >= 1 */
size_t llm_utf8_len(const unsigned char *p, size_t avail);

/* 1 if all of s[0, len) is valid UTF-8, else 0 */
int llm_utf8_valid(const char *s, size_t len);

/* the length a lead byte announces, for text already known valid (a
 * continuation byte counts 1) */
static inline size_t
llm_utf8_lead_len(unsigned char c)
{
    return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* cp (<= U+10FFFF) as 1-4 bytes at out; their count */
size_t llm_utf8_encode(uint32_t cp, char *out);

/* the code point of the valid sequence at s into *cp; its length, or 0
 * when s starts no valid sequence (len >= 1) */
size_t llm_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);

/* len, or less: the end of s[0, len) without the incomplete or invalid
 * sequence its last three bytes may start (a text cut at a byte count) */
size_t llm_utf8_cut(const unsigned char *s, size_t len);

#endif
