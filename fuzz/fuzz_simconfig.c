/* Fuzz target: the simulator's configuration reader (src/sim/json.c,
 * config.c). Any input must parse or fail with a message naming the file;
 * a configuration that passes the checks and is small (at most 1024 shards,
 * 8 ranks, 2 epochs) must simulate, every rank reading every sample of
 * every epoch (the hosts order: and the padding of its last round). */
#include <stdlib.h>
#include <string.h>

#include "sim/json.h"
#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* how many inputs simulated (the corpus test checks its seeds do) */
static unsigned fuzz_runs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct json *j = NULL;
    char err[512];
    if (json_parse((const char *)data, size, &j, err, sizeof err) == 0)
        json_free(j);
    else if (strncmp(err, "line ", 5) != 0)
        abort(); /* every syntax error says where */
    static struct sim_config c;
    if (sim_config_parse((const char *)data, size, "fuzz.json", &c, err, sizeof err)) {
        if (strncmp(err, "fuzz.json: ", 11) != 0)
            abort();
        return 0;
    }
    if (sim_config_check(&c, "fuzz.json", err, sizeof err)) {
        if (strncmp(err, "fuzz.json: ", 11) != 0)
            abort();
        return 0;
    }
    uint64_t per = c.shard_bytes / c.sample_bytes;
    if ((c.samples + per - 1) / per > 1024 || c.hosts * c.gpus > 8 || c.epochs > 2)
        return 0;
    struct sim_result r;
    if (sim_run(&c, NULL, &r, err, sizeof err))
        abort(); /* a checked configuration runs */
    uint64_t all = 0, world = (uint64_t)c.hosts * c.gpus;
    for (uint32_t i = 0; i < r.n_ranks; i++)
        all += r.rank[i].samples;
    /* the hosts order pads the last round, as its sampler does */
    uint64_t epoch = c.order == SIM_ORDER_HOSTS ? (c.samples + world - 1) / world * world
                                                : c.samples;
    if (all != epoch * c.epochs)
        abort();
    sim_result_free(&r);
    fuzz_runs++;
    return 0;
}
