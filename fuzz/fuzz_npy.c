/* libFuzzer target: the .npy header parser and the data-length check over
 * arbitrary bytes taken as a whole file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "store/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct npy_header h;
    char err[ERRMSG_MAX];
    int rc = npy_parse(data, size, "fuzz.npy", &h, err, sizeof err);
    if (rc != 0) {
        if (rc != CXLP_EBADINPUT && rc != CXLP_EUNSUPPORTED)
            abort();
        return 0;
    }
    if (h.data_offset > size || h.record_bytes == 0 || h.ndim > CXLP_MAX_DIMS)
        abort();
    rc = npy_check_size(&h, size, "fuzz.npy", err, sizeof err);
    if (rc == 0 && size - h.data_offset != h.data_bytes)
        abort();
    if (rc == 0 && h.data_bytes) {
        /* what the importer would do: touch the first and last data byte */
        volatile uint8_t x = data[h.data_offset] ^ data[size - 1];
        (void)x;
    }
    return 0;
}
