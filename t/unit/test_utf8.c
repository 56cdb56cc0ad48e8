/*
 * text/utf8: the one home of UTF-8's rules, against utf8proc as the
 * oracle: every sequence of one to three bytes and every four-byte lead
 * with its first continuation byte, every code point through encode and
 * decode, and the cut of a text at each byte count.
 */
#include "tap.h"
#include "text/utf8.h"

#include <stdint.h>
#include <string.h>
#include <utf8proc.h>


/* utf8proc's verdict on the sequence at s: its length, or 0 */
static size_t
oracle_len(const unsigned char *s, size_t n)
{
    utf8proc_int32_t  cp;
    utf8proc_ssize_t  k = utf8proc_iterate(s, (utf8proc_ssize_t) n, &cp);

    return k > 0 ? (size_t) k : 0;
}


static void
test_len_exhaustive(void)
{
    unsigned char  s[4];
    unsigned long  bad = 0, n = 0;
    uint32_t       a, b, c;

    for (a = 0; a < 256; a++) {
        s[0] = (unsigned char) a;
        bad += llm_utf8_len(s, 1) != oracle_len(s, 1);
        for (b = 0; b < 256; b++) {
            s[1] = (unsigned char) b;
            bad += llm_utf8_len(s, 2) != oracle_len(s, 2);
            for (c = 0; c < 256; c++) {
                s[2] = (unsigned char) c;
                bad += llm_utf8_len(s, 3) != oracle_len(s, 3);
                n += 1;
            }
            /* four bytes: the second byte decides, the rest continue */
            s[2] = 0x80;
            s[3] = 0xBF;
            bad += llm_utf8_len(s, 4) != oracle_len(s, 4);
        }
    }
    ok(bad == 0, "llm_utf8_len == utf8proc on %lu sequences (%lu differ)",
       n, bad);
}


static void
test_encode_decode(void)
{
    char           buf[4];
    uint32_t       cp, back;
    unsigned long  bad = 0;
    size_t         k;

    for (cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            continue;
        }
        k = llm_utf8_encode(cp, buf);
        bad += k != (size_t) utf8proc_encode_char((utf8proc_int32_t) cp,
                                                  (utf8proc_uint8_t *) buf + 0)
               || llm_utf8_decode((const unsigned char *) buf, k, &back) != k
               || back != cp;
    }
    ok(bad == 0, "every code point: encode, then decode gives it back");
    ok(llm_utf8_decode((const unsigned char *) "\xED\xA0\x80", 3, &back)
       == 0, "a surrogate decodes to nothing");
    ok(llm_utf8_decode((const unsigned char *) "\xC0\x80", 2, &back) == 0,
       "an overlong decodes to nothing");
    ok(llm_utf8_valid("h\xC3\xA9llo \xF0\x9F\x98\x80", 11)
       && !llm_utf8_valid("h\xC3", 2) && !llm_utf8_valid("\xFF", 1),
       "valid: a whole text, not one cut short or with a stray byte");
}


static void
test_cut(void)
{
    /* "aé€😀": 1 + 2 + 3 + 4 bytes; the character ends: 1, 3, 6, 10 */
    const unsigned char  *s = (const unsigned char *)
                              "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
    static const size_t   want[11] = { 0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10 };
    size_t                len, bad = 0;

    for (len = 0; len <= 10; len++) {
        bad += llm_utf8_cut(s, len) != want[len];
    }
    ok(bad == 0, "cut at each byte count ends at a character's end");
    ok(llm_utf8_cut((const unsigned char *) "ab\x80", 3) == 3,
       "cut keeps a stray continuation byte");
    ok(llm_utf8_cut((const unsigned char *) "ab\xFF", 3) == 2,
       "cut drops a last lead byte that starts nothing valid");
}


int
main(void)
{
    test_len_exhaustive();
    test_encode_decode();
    test_cut();
    return tap_done();
}
