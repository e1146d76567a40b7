/*
 * dtype.c - element types of schema fields: names and sizes.
 *
 * Names follow NumPy/PyTorch spelling ("float32", "bfloat16") because that is
 * what users type and what the Python layer maps to torch dtypes; a few short
 * aliases that cannot be misread are accepted on input. NumPy's "u8"-style
 * codes are not: "u8" means uint64 there and uint8 to everyone else.
 */
#include <string.h>

#include "common/common.h"

static const struct {
    const char *name;
    int size;
} dtypes[CXLP_DT_COUNT] = {
    [CXLP_DT_U8] = {"uint8", 1},     [CXLP_DT_I8] = {"int8", 1},
    [CXLP_DT_U16] = {"uint16", 2},   [CXLP_DT_I16] = {"int16", 2},
    [CXLP_DT_U32] = {"uint32", 4},   [CXLP_DT_I32] = {"int32", 4},
    [CXLP_DT_U64] = {"uint64", 8},   [CXLP_DT_I64] = {"int64", 8},
    [CXLP_DT_F16] = {"float16", 2},  [CXLP_DT_BF16] = {"bfloat16", 2},
    [CXLP_DT_F32] = {"float32", 4},  [CXLP_DT_F64] = {"float64", 8},
    [CXLP_DT_BOOL] = {"bool", 1},    [CXLP_DT_STR] = {"str", 1},
};

static const struct {
    const char *alias;
    int dtype;
} aliases[] = {
    {"fp16", CXLP_DT_F16}, {"half", CXLP_DT_F16},   {"bf16", CXLP_DT_BF16},
    {"fp32", CXLP_DT_F32}, {"float", CXLP_DT_F32},  {"fp64", CXLP_DT_F64},
    {"double", CXLP_DT_F64}, {"byte", CXLP_DT_U8},
};

const char *cxlp_dtype_name(int dtype)
{
    if (dtype < 0 || dtype >= CXLP_DT_COUNT)
        return "?";
    return dtypes[dtype].name;
}

int cxlp_dtype_size(int dtype)
{
    if (dtype < 0 || dtype >= CXLP_DT_COUNT)
        return -1;
    return dtypes[dtype].size;
}

int cxlp_dtype_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < CXLP_DT_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0)
            return i;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0)
            return aliases[i].dtype;
    return -1;
}
