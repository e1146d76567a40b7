/*
 * sim.h - the simulator (docs/sim.md): a discrete-event model of hosts,
 * tiers, ranks and the staging engine at shard granularity, that runs the
 * loader's own block or hosts order (src/sample) and placement policies
 * (src/tier/policy.h) over modelled links.
 *
 * Glossary
 *   tier       a kind of memory or storage with capacity, latency,
 *              bandwidth and concurrency per link; per host, or shared
 *              (one instance for every host: a CXL switch's pool, an
 *              NVMe-oF archive)
 *   home       the tier the dataset lives on (every shard has its copy)
 *   domain     the hosts that share one staging tier: each host when it is
 *              per host (DRAM, local CXL), all hosts when it is shared
 *   segment    what one rank reads of one window of the block order:
 *              the simulator's unit of consumption
 */
#ifndef CXLP_SIM_H
#define CXLP_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "tier/policy.h"

#define SIM_MAX_TIERS 8
#define SIM_MAX_EPOCHS 64
#define SIM_MAX_HOSTS 64
#define SIM_MAX_GPUS 64

enum sim_order {
    SIM_ORDER_BLOCK,         /* one block order for every host (windows of all shards) */
    SIM_ORDER_HOSTS,         /* the hosts order (src/sample/hosts.c): a share a host */
};

enum sim_kind {
    SIM_DRAM,
    SIM_CXL_LOCAL,
    SIM_CXL_SWITCH,
    SIM_PEER,                /* other hosts' memory over RDMA: modelled, not built */
    SIM_NVMEOF,
    SIM_NVME,
    SIM_KINDS
};

struct sim_tier {
    char name[32];
    int kind;                /* enum sim_kind */
    uint64_t capacity;       /* bytes of one instance (memory and storage tiers) */
    double latency_ns;
    double bandwidth;        /* bytes/s of one instance */
    uint32_t concurrency;    /* transfers one instance serves at once */
    int shared;              /* one instance for all hosts */
    int home;
};

struct sim_config {
    char name[64];           /* the preset or the file */
    uint64_t seed;
    uint32_t epochs;
    int policy;              /* enum cxlp_policy */
    uint64_t samples, sample_bytes, shard_bytes;
    uint64_t window;         /* shards per window of the block order; 0: half the
                                budget (window="auto" of the Python samplers) */
    int ramp;
    int order;               /* enum sim_order */
    /* the hosts order (order.*; DistributedCXLSampler(topology=...)) */
    uint32_t ranks_per_host; /* the order's host of rank r is r / this; 0: gpus */
    uint32_t n_weights;      /* 0: equal weights; 1: the same for all */
    uint64_t host_weights[SIM_MAX_HOSTS];
    int keep_blocks;
    uint32_t hosts, gpus;    /* gpus: ranks per host */
    double demand;           /* bytes/s one rank consumes */
    double demand_samples;   /* or samples/s (0: demand counts) */
    uint64_t batch;          /* samples per batch per rank */
    uint32_t n_tiers;
    struct sim_tier tier[SIM_MAX_TIERS];
    char staging[32];        /* staging tier's name; "" the first memory tier */
    uint64_t budget;         /* 0: the engine's default */
    uint32_t horizon;        /* batches held ahead; 0: the engine's default */
    uint32_t stagers;        /* copies at a time per domain */
    int sync;                /* ranks wait for each other at every window */
};

/* config.c */
/* The preset `name` ("design-cluster", "this-machine") into *c; -1 when
 * there is none. */
int sim_preset(const char *name, struct sim_config *c);
/* Reads a configuration from JSON text (file names it in messages): a
 * "preset" key first, then every other key over it. 0, or -1 with a
 * message naming the file and the key in err. */
int sim_config_parse(const char *text, size_t len, const char *file, struct sim_config *c,
                     char *err, size_t errlen);
/* Sets one key ("order.window", "policy", "rank.demand", "tiers.NAME.FIELD",
 * or a short name: window, demand, lookahead (staging.horizon_batches),
 * budget, gpus, order (order.kind)) from text, as --set and --sweep do;
 * order.host_weights as "3,1,1,1". 0 or -1 (err). */
int sim_config_set(struct sim_config *c, const char *key, const char *val, char *err,
                   size_t errlen);
/* Checks a configuration (bandwidths, capacities, a home that holds the
 * dataset). 0 or -1 (err names the key and file). */
int sim_config_check(const struct sim_config *c, const char *file, char *err, size_t errlen);
const char *sim_kind_name(int kind);
/* The hosts order's hosts: ceil(ranks / ranks per host). */
uint32_t sim_order_hosts(const struct sim_config *c);

/* sim.c */
struct sim_tier_stats {
    uint64_t hits, misses;           /* segment reads of a shard found / not found there */
    uint64_t bytes_read, bytes_written;
    uint64_t transfers;
    double queue_s, queue_max_s;     /* waits before a transfer moved */
};
struct sim_rank_stats {
    uint32_t host;
    uint64_t samples;
    double time_s, stall_s;
};
struct sim_epoch_stats {
    double local_bytes, peer_bytes, home_bytes; /* rank reads by the source of the copy */
    uint64_t home_read;              /* bytes first read in this epoch of copies from home */
    uint64_t home_moved;             /* bytes the home sent while the domain's
                                        slowest rank was in this epoch */
    uint64_t peer_moved;             /* bytes staged from a peer's copy, likewise */
    double end_s;                    /* when its last segment ended */
    double stall_s, rank_s;          /* over the ranks: stall and time in it */
};
struct sim_result {
    uint32_t n_tiers, n_ranks, n_epochs, n_domains;
    struct sim_tier_stats tier[SIM_MAX_TIERS];
    struct sim_rank_stats *rank;
    struct sim_epoch_stats epoch[SIM_MAX_EPOCHS];
    uint64_t shards, shard_samples, windows, horizon, budget, events, stages, evictions;
    uint64_t placed;
    uint32_t order_hosts;            /* the hosts order: its hosts (0: block order) */
    uint64_t sampled_rounds;         /* the hosts order: rounds walked a window at most */
    uint64_t sampler_bytes, engine_bytes, catalog_bytes; /* per host */
    double end_s;
    double placement_s;              /* before window 0: the slowest domain's placement
                                        (0 for policies that place nothing) */
    /* the timeline: at the start of every `every`-th global window (when
     * its first rank enters it), the time, the bytes of copies in the
     * staging tiers (all domains, kept ones too) and the ranks' mean stall
     * so far */
    struct sim_point {
        uint64_t window;
        double t, stall_s;
        uint64_t staged_bytes;
    } *timeline;
    size_t n_timeline;
    uint64_t every;
};

/* Runs c; ops: the policy table (NULL: the one of c->policy). 0, or -1
 * with a message in err. Free r with sim_result_free. */
int sim_run(const struct sim_config *c, const struct tier_policy_ops *ops, struct sim_result *r,
            char *err, size_t errlen);
void sim_result_free(struct sim_result *r);
/* The result as JSON (the same bytes for the same config). */
void sim_write_json(FILE *f, const struct sim_config *c, const struct sim_result *r);

/* The block order's window w of epoch e at shard granularity, through the
 * sampler's own code: its first epoch position, its positions, its shards
 * (out: up to cap). For tests. 0 or -1. */
int sim_window(const struct sim_config *c, uint64_t epoch, uint64_t w, uint64_t *start,
               uint64_t *count, uint64_t *shards, uint64_t cap, uint64_t *nsh);

/* calibrate.c: this machine's DRAM copy rate and its file tier's rate
 * of whole shards (shard bytes, 1 MiB or more, 4 KiB aligned) read in a
 * random order through the staging engine's reader, from a file of bytes
 * written in dir (removed after). 0 or -1 (err). */
struct sim_calib {
    double dram_bps, file_bps;
    int direct;              /* the reads bypassed the page cache (O_DIRECT) */
    uint64_t bytes, shard;
};
int sim_calibrate(const char *dir, uint64_t bytes, uint64_t shard, struct sim_calib *k, char *err,
                  size_t errlen);
/* The this-machine preset with those two bandwidths, as a configuration. */
void sim_calib_config(FILE *f, const struct sim_calib *k);

#endif
