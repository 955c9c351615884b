/* fuzz_marks.c: libFuzzer target for the marks file's reader
 * (store_marks_parse, store_marks.c), which a node reads at start from
 * segment.marks_file: any bytes must give a state or a reason, never a
 * crash, and a state it gives must hold together: every mark at least 1
 * and at most the largest, a refusal with a code, a server that fits.
 *
 * Input: a marks file (the seeds are files leafd wrote).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "store_marks.h"
#include "util.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *cause = NULL, code[32], why[MARKS_WHY_MAX], srv[MARKS_SERVER_MAX];
    FILE *f;
    int rc;

    if (size == 0)
        return 0;
    f = fmemopen((void *)data, size, "r");
    FUZZ_ASSERT(f != NULL);
    store_marks_reset();
    rc = store_marks_parse(f, "fuzz", &cause);
    fclose(f);
    if (rc == -1) {
        FUZZ_ASSERT(cause != NULL && cause[0] != '\0');
        free(cause);
        return 0;
    }
    FUZZ_ASSERT(cause == NULL);
    FUZZ_ASSERT(store_marks_max() >= 0);
    FUZZ_ASSERT(store_marks_count() > 0 ||
                (store_marks_max() == 0 && store_marks_serial_max() == 0));
    if (store_marks_refused(code, sizeof code, why, sizeof why))
        FUZZ_ASSERT(code[0] != '\0');
    store_marks_server(srv, sizeof srv);
    FUZZ_ASSERT(strlen(srv) < MARKS_SERVER_MAX);
    /* A range at the largest mark is taken; one starting below it is not. */
    if (store_marks_max() > 1 && !store_marks_refused(NULL, 0, NULL, 0)) {
        FUZZ_ASSERT(store_marks_take("fuzz-tag", 0, store_marks_max() + 1, 1,
                                     "fuzz", NULL) == 0);
        FUZZ_ASSERT(store_marks_take("fuzz-tag", 0, store_marks_max() - 1, 1,
                                     "fuzz", NULL) == -1);
    }
    return 0;
}
