/*
 * config.c - the simulator's configuration: presets, a JSON file over a
 * preset, single keys set from text (--sweep), and the checks that refuse
 * a configuration that cannot run (naming the key and the file).
 *
 * Keys are dotted paths ("order.window"); the tiers are an array of
 * objects, replaced whole by a file, addressed one field at a time by
 * "tiers.NAME.FIELD" from text. Sizes are bytes and rates bytes per second
 * (JSON numbers: 2e12 is fine; a size must be a whole number).
 *
 * The design-cluster preset's CXL figures are published figures
 * (shared/CXL.md), not measurements: latency 2.18x DRAM (CXL-DMSim, ASIC),
 * 36 GB/s per module (Micron CZ120, Samsung CMM-D). Its DRAM and NVMe-oF
 * figures are assumptions of the preset, said as such in the output.
 *
 * Rejected: TOML (no reader in the tree either, and JSON is what the
 * results are written in).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cxlpool.h"
#include "sim/json.h"
#include "sim/sim.h"

static const char *const kind_names[SIM_KINDS] = {"dram", "cxl_local", "cxl_switch",
                                                  "peer", "nvmeof", "nvme"};

const char *sim_kind_name(int kind)
{
    return kind >= 0 && kind < SIM_KINDS ? kind_names[kind] : "?";
}

static int kind_parse(const char *s)
{
    for (int i = 0; i < SIM_KINDS; i++)
        if (strcmp(s, kind_names[i]) == 0)
            return i;
    return -1;
}

static int is_memory(int kind)
{
    return kind == SIM_DRAM || kind == SIM_CXL_LOCAL || kind == SIM_CXL_SWITCH;
}

static void tier_set(struct sim_tier *t, const char *name, int kind, uint64_t cap, double lat_ns,
                     double bw, uint32_t conc, int shared, int home)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->capacity = cap;
    t->latency_ns = lat_ns;
    t->bandwidth = bw;
    t->concurrency = conc;
    t->shared = shared;
    t->home = home;
}

int sim_preset(const char *name, struct sim_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->seed = 1;
    c->epochs = 2;
    c->policy = CXLP_POLICY_LOOKAHEAD;
    c->sync = 1;
    c->stagers = 4;
    if (strcmp(name, "design-cluster") == 0) {
        /* docs/scale.md: 4 nodes x (8 GPUs, 2 TB DRAM, 64 TB CXL), a 1 PB
         * NVMe-oF archive; 10^11 samples of 2 KiB; 2 GB/s per GPU. The
         * hosts order: the design's shuffle across hosts
         * (DistributedCXLSampler(topology=...)), equal weights, a host's
         * 8 GPUs its ranks */
        c->order = SIM_ORDER_HOSTS;
        c->hosts = 4;
        c->gpus = 8;
        c->samples = 100000000000ull;
        c->sample_bytes = 2048;
        c->shard_bytes = 1ull << 30;
        c->window = 0;
        c->demand = 2e9;
        c->batch = 256;
        c->n_tiers = 3;
        /* DRAM: 100 ns, 300 GB/s a host (assumed: 8 channels of DDR5) */
        tier_set(&c->tier[0], "dram", SIM_DRAM, 2000000000000ull, 100, 300e9, 64, 0, 0);
        /* CXL: 2.18x DRAM's latency, 4 modules' links at 36 GB/s each
         * (published figures, shared/CXL.md) */
        tier_set(&c->tier[1], "cxl", SIM_CXL_LOCAL, 64000000000000ull, 218, 144e9, 32, 0, 0);
        /* the archive: 1 PB, 100 GB/s for all hosts, 100 us (assumed) */
        tier_set(&c->tier[2], "archive", SIM_NVMEOF, 1000000000000000ull, 100000, 100e9, 256, 1,
                 1);
        return 0;
    }
    if (strcmp(name, "this-machine") == 0) {
        /* bench_tiers' run of 2026-12-02 (AMD VM; its table is in
         * docs/benchmarks/history.md since 2026-12-07): 8 GiB of 8 KiB
         * records homed on an nvme tier in shards of 64 MiB, one 1 GiB dram
         * tier, one loader. Bandwidths: that run's rates of whole shards
         * read in a random order (1.53 GB/s: what staging reads) and of the
         * all-DRAM gather (6.89 GB/s); not a calibration */
        c->hosts = 1;
        c->gpus = 1;
        c->epochs = 1;
        c->samples = 1048576;
        c->sample_bytes = 8192;
        c->shard_bytes = 64ull << 20;
        c->window = 0;
        c->demand = 6.89e9;
        c->batch = 256;
        c->n_tiers = 2;
        tier_set(&c->tier[0], "dram", SIM_DRAM, 1ull << 30, 100, 6.89e9, 2, 0, 0);
        tier_set(&c->tier[1], "nvme", SIM_NVME, 64ull << 30, 100000, 1.53e9, 64, 0, 1);
        return 0;
    }
    return -1;
}

/* ------------------------------------------------------------ keys */

enum { K_U64, K_U32, K_DBL, K_BOOL, K_STR, K_POLICY, K_DEMAND, K_DEMAND_S, K_ORDER, K_WEIGHTS };

struct key {
    const char *name;
    int type;
    size_t off;
    size_t len;              /* K_STR */
};

#define F(x) offsetof(struct sim_config, x)
static const struct key keys[] = {
    {"seed", K_U64, F(seed), 0},
    {"epochs", K_U32, F(epochs), 0},
    {"policy", K_POLICY, F(policy), 0},
    {"sync", K_BOOL, F(sync), 0},
    {"hosts", K_U32, F(hosts), 0},
    {"gpus_per_host", K_U32, F(gpus), 0},
    {"dataset.samples", K_U64, F(samples), 0},
    {"dataset.sample_bytes", K_U64, F(sample_bytes), 0},
    {"dataset.shard_bytes", K_U64, F(shard_bytes), 0},
    {"order.window", K_U64, F(window), 0},
    {"order.ramp", K_BOOL, F(ramp), 0},
    {"order.kind", K_ORDER, F(order), 0},
    {"order.host_weights", K_WEIGHTS, F(host_weights), 0},
    {"order.ranks_per_host", K_U32, F(ranks_per_host), 0},
    {"order.keep_blocks", K_BOOL, F(keep_blocks), 0},
    {"rank.demand", K_DEMAND, F(demand), 0},
    {"rank.demand_samples", K_DEMAND_S, F(demand_samples), 0},
    {"rank.batch", K_U64, F(batch), 0},
    {"staging.tier", K_STR, F(staging), sizeof(((struct sim_config *)0)->staging)},
    {"staging.budget", K_U64, F(budget), 0},
    {"staging.horizon_batches", K_U32, F(horizon), 0},
    {"staging.stagers", K_U32, F(stagers), 0},
};
#undef F

#define T(x) offsetof(struct sim_tier, x)
static const struct key tkeys[] = {
    {"name", K_STR, T(name), sizeof(((struct sim_tier *)0)->name)},
    {"kind", K_STR, 0, 0}, /* handled by name */
    {"capacity", K_U64, T(capacity), 0},
    {"latency_ns", K_DBL, T(latency_ns), 0},
    {"bandwidth", K_DBL, T(bandwidth), 0},
    {"concurrency", K_U32, T(concurrency), 0},
    {"shared", K_BOOL, T(shared), 0},
    {"home", K_BOOL, T(home), 0},
};
#undef T

/* A value, as a number (num), a boolean or a string (str): from JSON or
 * from text. */
struct val {
    int is_num, is_bool, is_str;
    double num;
    int b;
    const char *str;
    const struct json *arr;  /* a JSON array; from text, str is the list */
};

/* order.host_weights: whole numbers from a JSON array or "3,1,1,1" */
static int put_weights(struct sim_config *c, const struct val *v, const char *where,
                       const char *file, char *err, size_t errlen)
{
    uint64_t w[SIM_MAX_HOSTS];
    uint32_t n = 0;
    const char *p = v->arr ? NULL : v->is_str ? v->str : NULL;
    if (!v->arr && !p)
        goto bad;
    for (;;) {
        double x;
        if (v->arr) {
            if (n == v->arr->n)
                break;
            if (v->arr->kid[n].type != JSON_NUM)
                goto bad;
            x = v->arr->kid[n].num;
        } else {
            char *end = NULL;
            if (!*p)
                goto bad;
            x = strtod(p, &end);
            if (end == p || (*end && *end != ','))
                goto bad;
            p = *end ? end + 1 : end;
        }
        if (n >= SIM_MAX_HOSTS) {
            snprintf(err, errlen, "%s: key %s: at most %d weights", file, where, SIM_MAX_HOSTS);
            return -1;
        }
        if (!(x >= 0) || x > 9223372036854775807.0 || x != (double)(uint64_t)x)
            goto bad;
        w[n++] = (uint64_t)x;
        if (!v->arr && !*p)
            break;
    }
    c->n_weights = n;
    memcpy(c->host_weights, w, n * sizeof *w);
    return 0;
bad:
    snprintf(err, errlen, "%s: key %s: a list of whole numbers from 0 to 2^63, one a host of "
             "the order (or one for all)", file, where);
    return -1;
}

static int put(void *base, const struct key *k, const struct val *v, const char *where,
               const char *file, char *err, size_t errlen)
{
    char *p = (char *)base + k->off;
    switch (k->type) {
    case K_U64:
    case K_U32: {
        double lim = k->type == K_U64 ? 9223372036854775807.0 : 4294967295.0;
        /* whole: within range, it converts back to itself */
        if (!v->is_num || !(v->num >= 0) || v->num > lim ||
            v->num != (double)(uint64_t)v->num) {
            snprintf(err, errlen, "%s: key %s: a whole number from 0 to %.0f", file, where, lim);
            return -1;
        }
        if (k->type == K_U64)
            *(uint64_t *)(void *)p = (uint64_t)v->num;
        else
            *(uint32_t *)(void *)p = (uint32_t)v->num;
        return 0;
    }
    case K_DBL:
    case K_DEMAND:
    case K_DEMAND_S:
        if (!v->is_num || !isfinite(v->num)) {
            snprintf(err, errlen, "%s: key %s: a number", file, where);
            return -1;
        }
        *(double *)(void *)p = v->num;
        if (k->type == K_DEMAND)
            ((struct sim_config *)base)->demand_samples = 0;
        if (k->type == K_DEMAND_S)
            ((struct sim_config *)base)->demand = 0;
        return 0;
    case K_BOOL:
        if (!v->is_bool) {
            snprintf(err, errlen, "%s: key %s: true or false", file, where);
            return -1;
        }
        *(int *)(void *)p = v->b;
        return 0;
    case K_STR:
        if (!v->is_str || strlen(v->str) >= k->len) {
            snprintf(err, errlen, "%s: key %s: a string of at most %zu bytes", file, where,
                     k->len - 1);
            return -1;
        }
        snprintf(p, k->len, "%s", v->str);
        return 0;
    case K_ORDER:
        if (!v->is_str || (strcmp(v->str, "block") && strcmp(v->str, "hosts"))) {
            snprintf(err, errlen, "%s: key %s: block or hosts", file, where);
            return -1;
        }
        *(int *)(void *)p = strcmp(v->str, "hosts") == 0 ? SIM_ORDER_HOSTS : SIM_ORDER_BLOCK;
        return 0;
    case K_WEIGHTS:
        return put_weights((struct sim_config *)base, v, where, file, err, errlen);
    case K_POLICY: {
        int pol = v->is_str ? cxlp_policy_parse(v->str) : -1;
        if (pol <= 0) {
            snprintf(err, errlen, "%s: key %s: lookahead, lru, streaming, hot_first or "
                     "full_prefetch", file, where);
            return -1;
        }
        *(int *)(void *)p = pol;
        return 0;
    }
    }
    return -1;
}

static int put_tier(struct sim_tier *t, const char *field, const struct val *v, const char *where,
                    const char *file, char *err, size_t errlen)
{
    if (strcmp(field, "kind") == 0) {
        int k = v->is_str ? kind_parse(v->str) : -1;
        if (k < 0) {
            snprintf(err, errlen, "%s: key %s: dram, cxl_local, cxl_switch, peer, nvmeof or "
                     "nvme", file, where);
            return -1;
        }
        t->kind = k;
        return 0;
    }
    for (size_t i = 0; i < sizeof tkeys / sizeof *tkeys; i++)
        if (strcmp(field, tkeys[i].name) == 0)
            return put(t, &tkeys[i], v, where, file, err, errlen);
    snprintf(err, errlen, "%s: unknown key %s", file, where);
    return -1;
}

static void val_of(const struct json *j, struct val *v)
{
    memset(v, 0, sizeof *v);
    v->is_num = j->type == JSON_NUM;
    v->num = j->num;
    v->is_bool = j->type == JSON_BOOL;
    v->b = j->b;
    v->is_str = j->type == JSON_STR;
    v->str = j->str;
    v->arr = j->type == JSON_ARR ? j : NULL;
}

static int walk(struct sim_config *c, const struct json *o, const char *prefix, const char *file,
                char *err, size_t errlen)
{
    for (size_t i = 0; i < o->n; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", o->key[i]);
        const struct json *v = &o->kid[i];
        if (!*prefix && strcmp(o->key[i], "preset") == 0)
            continue;
        if (!*prefix && strcmp(o->key[i], "tiers") == 0) {
            if (v->type != JSON_ARR || v->n == 0 || v->n > SIM_MAX_TIERS) {
                snprintf(err, errlen, "%s: key tiers: an array of 1 to %d tiers", file,
                         SIM_MAX_TIERS);
                return -1;
            }
            c->n_tiers = (uint32_t)v->n;
            for (size_t t = 0; t < v->n; t++) {
                const struct json *to = &v->kid[t];
                struct sim_tier *st = &c->tier[t];
                tier_set(st, "", SIM_DRAM, 0, 0, 0, 1, 0, 0);
                if (to->type != JSON_OBJ) {
                    snprintf(err, errlen, "%s: key tiers[%zu]: an object", file, t);
                    return -1;
                }
                for (size_t f = 0; f < to->n; f++) {
                    char tp[160];
                    struct val tv;
                    snprintf(tp, sizeof tp, "tiers[%zu].%s", t, to->key[f]);
                    val_of(&to->kid[f], &tv);
                    if (put_tier(st, to->key[f], &tv, tp, file, err, errlen))
                        return -1;
                }
                if (!st->name[0])
                    snprintf(st->name, sizeof st->name, "%s", sim_kind_name(st->kind));
            }
            continue;
        }
        if (v->type == JSON_OBJ) {
            size_t np = strlen(path);
            int known = 0;
            for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
                known |= strncmp(keys[k].name, path, np) == 0 && keys[k].name[np] == '.';
            if (!known) {
                snprintf(err, errlen, "%s: unknown key %s", file, path);
                return -1;
            }
            if (walk(c, v, path, file, err, errlen))
                return -1;
            continue;
        }
        const struct key *k = NULL;
        for (size_t x = 0; x < sizeof keys / sizeof *keys; x++)
            if (strcmp(keys[x].name, path) == 0)
                k = &keys[x];
        if (!k) {
            snprintf(err, errlen, "%s: unknown key %s", file, path);
            return -1;
        }
        struct val val;
        val_of(v, &val);
        if (put(c, k, &val, path, file, err, errlen))
            return -1;
    }
    return 0;
}

int sim_config_parse(const char *text, size_t len, const char *file, struct sim_config *c,
                     char *err, size_t errlen)
{
    struct json *j = NULL;
    char jerr[200];
    if (json_parse(text, len, &j, jerr, sizeof jerr)) {
        snprintf(err, errlen, "%s: %s", file, jerr);
        return -1;
    }
    int rc = -1;
    if (j->type != JSON_OBJ) {
        snprintf(err, errlen, "%s: the configuration is a JSON object", file);
        goto out;
    }
    const struct json *pr = json_get(j, "preset");
    if (pr && (pr->type != JSON_STR || sim_preset(pr->str, c))) {
        snprintf(err, errlen, "%s: key preset: design-cluster or this-machine", file);
        goto out;
    }
    if (!pr) {
        sim_preset("design-cluster", c); /* the defaults of every key */
        c->n_tiers = 0;                  /* but tiers must be given */
    }
    snprintf(c->name, sizeof c->name, "%s", file);
    rc = walk(c, j, "", file, err, errlen);
out:
    json_free(j);
    return rc;
}

/* the short names for the knobs a sweep turns */
static const char *const aliases[][2] = {
    {"window", "order.window"},
    {"demand", "rank.demand"},
    {"lookahead", "staging.horizon_batches"},
    {"budget", "staging.budget"},
    {"gpus", "gpus_per_host"},
    {"order", "order.kind"},
};

int sim_config_set(struct sim_config *c, const char *key, const char *text, char *err,
                   size_t errlen)
{
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (strcmp(key, aliases[i][0]) == 0)
            key = aliases[i][1];
    struct val v = {0};
    char *end = NULL;
    v.num = strtod(text, &end);
    v.is_num = end && end != text && *end == '\0';
    v.is_bool = strcmp(text, "true") == 0 || strcmp(text, "false") == 0;
    v.b = text[0] == 't';
    v.is_str = 1;
    v.str = text;
    if (strncmp(key, "tiers.", 6) == 0) {
        const char *dot = strchr(key + 6, '.');
        if (!dot) {
            snprintf(err, errlen, "--sweep: key %s: tiers.NAME.FIELD", key);
            return -1;
        }
        for (uint32_t t = 0; t < c->n_tiers; t++)
            if (strlen(c->tier[t].name) == (size_t)(dot - key - 6) &&
                strncmp(c->tier[t].name, key + 6, (size_t)(dot - key - 6)) == 0)
                return put_tier(&c->tier[t], dot + 1, &v, key, "--sweep", err, errlen);
        snprintf(err, errlen, "--sweep: key %s: no tier of that name", key);
        return -1;
    }
    for (size_t x = 0; x < sizeof keys / sizeof *keys; x++)
        if (strcmp(keys[x].name, key) == 0)
            return put(c, &keys[x], &v, key, "--sweep", err, errlen);
    snprintf(err, errlen, "--sweep: unknown key %s", key);
    return -1;
}

/* ------------------------------------------------------------ checks */

uint32_t sim_order_hosts(const struct sim_config *c)
{
    uint64_t k = c->ranks_per_host ? c->ranks_per_host : c->gpus;
    uint64_t world = (uint64_t)c->hosts * c->gpus;
    uint64_t h = k ? (world + k - 1) / k : 0;
    return h > UINT32_MAX ? UINT32_MAX : (uint32_t)h;
}

int sim_config_check(const struct sim_config *c, const char *file, char *err, size_t errlen)
{
#define BAD(...)                                                                               \
    do {                                                                                       \
        int n_ = snprintf(err, errlen, "%s: ", file);                                          \
        if (n_ >= 0 && (size_t)n_ < errlen)                                                    \
            snprintf(err + n_, errlen - (size_t)n_, __VA_ARGS__);                              \
        return -1;                                                                             \
    } while (0)
    if (c->hosts < 1 || c->hosts > SIM_MAX_HOSTS)
        BAD("key hosts: 1 to %d", SIM_MAX_HOSTS);
    if (c->gpus < 1 || c->gpus > SIM_MAX_GPUS)
        BAD("key gpus_per_host: 1 to %d", SIM_MAX_GPUS);
    if (c->epochs < 1 || c->epochs > SIM_MAX_EPOCHS)
        BAD("key epochs: 1 to %d", SIM_MAX_EPOCHS);
    if (c->samples < 1 || c->samples > CXLP_SAMPLER_MAX_N)
        BAD("key dataset.samples: 1 to 2^63");
    if (c->sample_bytes < 1 || c->sample_bytes > (1ull << 40))
        BAD("key dataset.sample_bytes: 1 to 2^40");
    if (c->shard_bytes < c->sample_bytes)
        BAD("key dataset.shard_bytes: at least dataset.sample_bytes (%llu)",
            (unsigned long long)c->sample_bytes);
    if (c->samples > UINT64_MAX / c->sample_bytes)
        BAD("keys dataset.samples and dataset.sample_bytes: more than 2^64 bytes");
    if (c->samples / (c->shard_bytes / c->sample_bytes) > (1ull << 26))
        BAD("key dataset.shard_bytes: more than 2^26 shards (%llu samples of %llu bytes in "
            "shards of %llu): simulate with larger shards",
            (unsigned long long)c->samples, (unsigned long long)c->sample_bytes,
            (unsigned long long)c->shard_bytes);
    if (c->batch < 1)
        BAD("key rank.batch: at least 1");
    if (!(c->demand > 0) && !(c->demand_samples > 0))
        BAD("key rank.demand: bytes/s above 0 (or rank.demand_samples: samples/s)");
    if (c->stagers < 1 || c->stagers > CXLP_MAX_STAGERS)
        BAD("key staging.stagers: 1 to %d", CXLP_MAX_STAGERS);
    if (c->n_tiers < 1)
        BAD("key tiers: at least one tier");
    if (c->order != SIM_ORDER_HOSTS) {
        if (c->n_weights)
            BAD("key order.host_weights: for order.kind hosts");
        if (c->ranks_per_host)
            BAD("key order.ranks_per_host: for order.kind hosts");
        if (c->keep_blocks)
            BAD("key order.keep_blocks: for order.kind hosts");
    } else {
        uint32_t H = sim_order_hosts(c);
        if (c->ramp)
            BAD("key order.ramp: the hosts order has no ramp");
        if (H > SIM_MAX_HOSTS)
            BAD("key order.ranks_per_host: %u ranks in hosts of %u are %u hosts; at most %d",
                c->hosts * c->gpus, c->ranks_per_host, H, SIM_MAX_HOSTS);
        if (c->n_weights > 1 && c->n_weights != H)
            BAD("key order.host_weights: %u weights for the order's %u hosts (%u ranks, %u "
                "a host)", c->n_weights, H, c->hosts * c->gpus,
                c->ranks_per_host ? c->ranks_per_host : c->gpus);
        uint64_t sum = 0;
        for (uint32_t i = 0; i < c->n_weights; i++) {
            if (c->host_weights[i] > CXLP_SAMPLER_MAX_N - sum)
                BAD("key order.host_weights: the weights sum past 2^63");
            sum += c->host_weights[i];
        }
        if (c->n_weights && !sum)
            BAD("key order.host_weights: every weight is 0 (at least one host must take "
                "blocks)");
    }
    int homes = 0, mem = 0, staging = -1;
    uint64_t data = c->samples * c->sample_bytes;
    for (uint32_t i = 0; i < c->n_tiers; i++) {
        const struct sim_tier *t = &c->tier[i];
        if (t->kind < 0 || t->kind >= SIM_KINDS)
            BAD("key tiers[%u].kind: not a kind", i);
        if (!(t->bandwidth > 0) || !isfinite(t->bandwidth))
            BAD("key tiers[%u].bandwidth (%s): bytes/s above 0, not %g", i, t->name,
                t->bandwidth);
        if (!(t->latency_ns >= 0) || !isfinite(t->latency_ns))
            BAD("key tiers[%u].latency_ns (%s): 0 or more", i, t->name);
        if (t->concurrency < 1 || t->concurrency > 4096)
            BAD("key tiers[%u].concurrency (%s): 1 to 4096", i, t->name);
        if (t->kind != SIM_PEER && t->capacity == 0)
            BAD("key tiers[%u].capacity (%s): bytes above 0", i, t->name);
        if (t->kind == SIM_PEER && (t->home || t->shared))
            BAD("key tiers[%u] (%s): a peer tier is neither home nor shared", i, t->name);
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(c->tier[k].name, t->name) == 0)
                BAD("key tiers[%u].name: %s twice", i, t->name);
        homes += t->home;
        if (t->home && t->capacity < data)
            BAD("key tiers[%u].capacity (%s): the home holds %llu bytes, the dataset is %llu",
                i, t->name, (unsigned long long)t->capacity, (unsigned long long)data);
        if (is_memory(t->kind)) {
            mem++;
            if (c->staging[0] ? strcmp(c->staging, t->name) == 0 : staging < 0)
                staging = (int)i;
            if (i > 0 && !is_memory(c->tier[i - 1].kind) && c->tier[i - 1].kind != SIM_PEER)
                BAD("key tiers[%u] (%s): memory tiers come first, fastest first", i, t->name);
        }
    }
    if (homes > 1)
        BAD("key tiers: %d tiers say home; one holds the dataset", homes);
    if (!homes)
        BAD("key tiers: no tier is home (\"home\": true): the dataset (%llu bytes) needs one",
            (unsigned long long)data);
    if (!mem)
        BAD("key tiers: no memory tier (dram, cxl_local, cxl_switch) to stage into");
    if (staging < 0)
        BAD("key staging.tier: %s is not a memory tier", c->staging);
    if (c->tier[staging].home)
        BAD("key staging.tier: %s is the home", c->tier[staging].name);
    if (c->tier[staging].shared && c->hosts * c->gpus > 64)
        BAD("key staging.tier: a shared staging tier serves at most 64 ranks (%u here)",
            c->hosts * c->gpus);
    return 0;
#undef BAD
}
