/*
 * tier.h - the tier layer's private interface: naming tiers, and what the
 * gather engine asks of the staging engine (stage.c).
 */
#ifndef CXLP_TIER_H
#define CXLP_TIER_H

#include "common/common.h"
#include "pool/pool.h"

/* A tier named by kind ("dram", "cxl", "nvme": the first tier of that
 * kind) or by index; -1 when the pool has no such tier. */
int tier_lookup(struct attach *a, const char *tier);

#endif
