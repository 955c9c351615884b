/* fuzz_serial_reveal.c: libFuzzer target for the parsers concealed serials
 * added: serial_reveal (a serial's text back to its period and counter,
 * GET /serial/decode) and the row names serial_rows_check reads back
 * (with a concealed code's ".k<16 hex>" part).
 *
 * Two codes, PAY concealed under a key file this target writes once (mode
 * 600) and INV plain, yyMMdd and a month reset. The input is tried as a
 * serial of each, and as a row name for each. Checked: a decoded serial
 * has a period of 4 to 8 digits and a counter below 10^digits, and for the
 * concealed code enciphering the counter under the period's tweak gives
 * the serial's digits back; serial_rows_check returns 0 or -1, with a
 * cause exactly when -1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "config.h"
#include "ff1.h"
#include "serial.h"
#include "store.h"

static struct serials *defs;
static struct config cfg;

static const uint8_t KEY[16] = {
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
    0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
};

static void
init(void)
{
    char path[] = "/tmp/fuzz_serial_reveal.XXXXXX", text[512], *cause = NULL;
    int fd = mkstemp(path);

    FUZZ_ASSERT(fd >= 0 && fchmod(fd, 0600) == 0);
    FUZZ_ASSERT(write(fd, "2b7e151628aed2a6abf7158809cf4f3c\n", 33) == 33);
    close(fd);
    snprintf(text, sizeof text, "serial.count_max = 10\n"
             "serial.PAY.prefix = PAY\nserial.PAY.conceal = true\n"
             "serial.PAY.key_file = %s\nserial.INV.prefix = INV\n"
             "serial.INV.pattern = yyMMdd\nserial.INV.reset = month\n"
             "serial.INV.digits = 8\n", path);
    config_defaults(&cfg);
    cfg.from_file = 1;
    FUZZ_ASSERT(config_load_string(&cfg, "f.conf", text, &cause) == 0);
    defs = serials_new(&cfg, NULL, &cause);
    FUZZ_ASSERT(defs != NULL);
    unlink(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_row row;
    char text[64], period[16], tweak[SERIAL_TWEAK_MAX], *cause = NULL;
    const char *why = NULL;
    uint64_t n, back;

    if (defs == NULL)
        init();
    if (size > sizeof text - 1)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (size_t i = 0; i < serials_count(defs); i++) {
        const struct serial_def *d = serials_def(defs, i);
        int rc;

        if (serial_reveal(defs, i, text, size, period, &n, &why) == 0) {
            size_t pl = strlen(period);

            FUZZ_ASSERT(pl >= 4 && pl <= 8);
            FUZZ_ASSERT(n <= serial_digits_max(d->digits));
            if (d->conceal) {
                struct ff1_key *k = ff1_key_new(KEY, 16, NULL);
                struct ff1_domain dom;

                serial_tweak_of(d, period, tweak);
                FUZZ_ASSERT(ff1_domain_init(&dom, k, 10, (unsigned)d->digits,
                                            tweak, strlen(tweak), NULL) == 0);
                FUZZ_ASSERT(ff1_encrypt_u64(k, &dom, n, &back) == 0);
                FUZZ_ASSERT(back == strtoull(text + size - (size_t)d->digits,
                                             NULL, 10));
                ff1_key_free(k);
            }
        } else
            FUZZ_ASSERT(why != NULL);
        memset(&row, 0, sizeof row);
        snprintf(row.biz_tag, sizeof row.biz_tag, "%s", text);
        snprintf(row.description, sizeof row.description, "%s",
                 STORE_SERIAL_DESCRIPTION);
        rc = serial_rows_check(defs, i, &row, 1, INT64_C(1795392000000), &cause);
        FUZZ_ASSERT((rc == -1) == (cause != NULL));
        free(cause);
        cause = NULL;
    }
    return 0;
}
