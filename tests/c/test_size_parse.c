/* cxlp_size_parse: the sizes the CLI and the Python layer accept, and the
 * text they refuse (sign, blanks, exponent, unknown unit, 64-bit overflow). */
#include "test.h"

int main(void)
{
    static const struct {
        const char *s;
        uint64_t v;
    } good[] = {
        {"0", 0}, {"4096", 4096}, {"64K", 64ull << 10}, {"64k", 64ull << 10},
        {"1G", 1ull << 30}, {"1GiB", 1ull << 30}, {"1GB", 1000000000ull},
        {"512G", 512ull << 30}, {"1.5G", 3ull << 29}, {"0.5K", 512}, {"1.5", 1},
        {"2T", 2ull << 40}, {"1P", 1ull << 50}, {"16383P", 16383ull << 50},
        {"18446744073709551615", UINT64_MAX}, {"500MB", 500000000ull},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        uint64_t v = 1;
        CHECK_OK(cxlp_size_parse(good[i].s, &v));
        if (v != good[i].v) {
            fprintf(stderr, "%s -> %llu, want %llu\n", good[i].s, (unsigned long long)v,
                    (unsigned long long)good[i].v);
            return 1;
        }
    }
    static const char *bad[] = {"", "-1", "+1", " 1", "1 ", "1e3", "1.", ".5", "G", "1X",
                                "1GiBx", "1Gb", "18446744073709551616", "16384P", "0x10",
                                "1.5.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v = 7;
        CHECK_RC(cxlp_size_parse(bad[i], &v), CXLP_EARG);
        CHECK(v == 7 && strstr(cxlp_errmsg(NULL), "size '"));
    }
    CHECK_RC(cxlp_size_parse(NULL, NULL), CXLP_EARG);
    printf("ok\n");
    return 0;
}
