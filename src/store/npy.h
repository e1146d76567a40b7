/*
 * npy.h - the NumPy .npy header parser: a pure function over a byte buffer,
 * so the importer, the tests and the fuzz target all drive the same code.
 *
 * Errors are returned as a code plus a message in a caller-supplied buffer
 * (there is no handle at this level); every message starts with the file
 * name passed in and names the header field it is about.
 */
#ifndef CXLP_NPY_H
#define CXLP_NPY_H

#include <stddef.h>
#include <stdint.h>

/* NumPy 2 raised NPY_MAXDIMS to 64; a header with more axes is malformed. */
#define NPY_MAX_NDIM 64
/* Bytes before the header dict: magic (6), major, minor, length (2 or 4). */
#define NPY_PREAMBLE_V1 10
#define NPY_PREAMBLE_V2 12
/* A header longer than this is refused (numpy itself refuses > 10000 bytes
 * unless told otherwise); it bounds the importer's header read. */
#define NPY_HEADER_MAX (1u << 20)

struct npy_header {
    int major, minor;
    int dtype;               /* enum cxlp_dtype */
    int itemsize;
    int ndim;                /* axes in the file, 0..NPY_MAX_NDIM */
    uint64_t shape[NPY_MAX_NDIM];
    uint64_t data_offset;    /* preamble + header dict: where the data starts */
    uint64_t n_records;      /* shape[0], or 1 for a 0-d array */
    uint64_t record_bytes;   /* prod(shape[1:]) * itemsize */
    uint64_t data_bytes;     /* n_records * record_bytes */
};

/* Reads the preamble in buf[0..len) and sets *data_offset to where the data
 * starts (preamble + declared header length). Needs len >= NPY_PREAMBLE_V2
 * unless the version is 1.0 (NPY_PREAMBLE_V1). Returns 0, CXLP_EBADINPUT
 * (magic, truncated, header too long) or CXLP_EUNSUPPORTED (version). */
int npy_preamble(const uint8_t *buf, uint64_t len, const char *name,
                 uint64_t *data_offset, char *err, size_t errcap);

/* Parses the whole header in buf[0..len) (len may extend past the header:
 * data bytes are not looked at). Returns 0 and fills *h, or CXLP_EBADINPUT
 * (malformed: bad syntax, missing or extra key, bad shape, overflow) or
 * CXLP_EUNSUPPORTED (version, dtype, fortran_order True, too many axes, empty
 * records), with a message naming name and the field in err. */
int npy_parse(const uint8_t *buf, uint64_t len, const char *name,
              struct npy_header *h, char *err, size_t errcap);

/* Checks that a file of file_size bytes holds exactly the data the header
 * declares: CXLP_EBADINPUT naming expected and actual bytes otherwise. */
int npy_check_size(const struct npy_header *h, uint64_t file_size, const char *name,
                   char *err, size_t errcap);

/* The numpy descr string for a supported dtype ("<f4", "|u1"), for messages
 * and tests; "?" for others. */
const char *npy_descr(int dtype);

#endif
