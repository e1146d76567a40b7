/* The simulator's configuration: presets pass the checks; a file over a
 * preset sets what it names; bad files are refused with a message naming
 * the file and the key (unknown keys, zero or negative bandwidths, no
 * home, a home smaller than the dataset, wrong types, JSON syntax with its
 * line); --sweep's single keys; and the committed fuzz corpus replayed
 * through the fuzz target's body (its seeds simulate). */

#include "test.h"
#include "../../fuzz/fuzz_simconfig.c"

static const char *TIERS =
    "\"tiers\": [{\"name\": \"dram\", \"kind\": \"dram\", \"capacity\": 1e9, \"bandwidth\": 1e10,"
    " \"concurrency\": 4},"
    " {\"name\": \"disk\", \"kind\": \"nvme\", \"capacity\": 1e12, \"bandwidth\": %s,"
    " \"concurrency\": 4, \"home\": %s}]";

/* Parses text (and checks it); 0 or -1 with err. */
static int parse(const char *text, struct sim_config *c, char *err, size_t errlen)
{
    int rc = sim_config_parse(text, strlen(text), "cfg.json", c, err, errlen);
    if (!rc)
        rc = sim_config_check(c, "cfg.json", err, errlen);
    return rc;
}

static void refused(const char *text, const char *want)
{
    static struct sim_config c;
    char err[512] = "";
    if (parse(text, &c, err, sizeof err) == 0) {
        fprintf(stderr, "accepted: %s\n", text);
        CHECK(0);
    }
    if (!strstr(err, want) || strncmp(err, "cfg.json: ", 10) != 0) {
        fprintf(stderr, "message \"%s\" lacks \"%s\" or the file\n", err, want);
        CHECK(0);
    }
}

static void with_tiers(char *buf, size_t len, const char *bw, const char *home)
{
    char t[600];
    snprintf(t, sizeof t, TIERS, bw, home);
    snprintf(buf, len, "{\"preset\": \"this-machine\", %s}", t);
}

static void test_presets_and_keys(void)
{
    static struct sim_config c;
    char err[512];
    CHECK(sim_preset("design-cluster", &c) == 0);
    CHECK(sim_config_check(&c, "design-cluster", err, sizeof err) == 0);
    CHECK(c.hosts == 4 && c.gpus == 8 && c.samples == 100000000000ull && c.sample_bytes == 2048);
    CHECK(c.demand == 2e9);
    CHECK(sim_preset("this-machine", &c) == 0);
    CHECK(sim_config_check(&c, "this-machine", err, sizeof err) == 0);
    CHECK(sim_preset("no-such", &c) == -1);

    char buf[1200];
    with_tiers(buf, sizeof buf, "2e9", "true");
    CHECK(parse(buf, &c, err, sizeof err) == 0);
    CHECK(c.n_tiers == 2 && c.tier[1].home && c.tier[1].bandwidth == 2e9);
    CHECK(c.tier[0].capacity == 1000000000ull);
    const char *over = "{\"preset\": \"design-cluster\", \"policy\": \"streaming\", \"order\": "
                       "{\"window\": 7}, \"rank\": {\"demand_samples\": 1000}}";
    CHECK(parse(over, &c, err, sizeof err) == 0);
    CHECK(c.policy == CXLP_POLICY_STREAMING && c.window == 7 && c.demand_samples == 1000);
    CHECK(c.hosts == 4); /* the preset's */

    CHECK(sim_config_set(&c, "order.window", "9", err, sizeof err) == 0 && c.window == 9);
    CHECK(sim_config_set(&c, "tiers.archive.bandwidth", "5e10", err, sizeof err) == 0);
    CHECK(c.tier[2].bandwidth == 5e10);
    CHECK(sim_config_set(&c, "policy", "lru", err, sizeof err) == 0);
    CHECK(c.policy == CXLP_POLICY_LRU);
    CHECK(sim_config_set(&c, "window", "11", err, sizeof err) == 0 && c.window == 11);
    CHECK(sim_config_set(&c, "demand", "3e9", err, sizeof err) == 0 && c.demand == 3e9);
    CHECK(sim_config_set(&c, "lookahead", "16", err, sizeof err) == 0 && c.horizon == 16);
    CHECK(sim_config_set(&c, "order.widow", "9", err, sizeof err) == -1);
    CHECK(strstr(err, "order.widow"));
    CHECK(sim_config_set(&c, "tiers.nope.bandwidth", "1", err, sizeof err) == -1);
    CHECK(sim_config_set(&c, "hosts", "1.5", err, sizeof err) == -1);
    CHECK(strstr(err, "hosts"));
}

/* The hosts order's keys: set from a file and from text, and refused
 * with the key and the file named. */
static void test_hosts_keys(void)
{
    static struct sim_config c;
    char err[512];
    const char *ok = "{\"preset\": \"design-cluster\", \"order\": {\"kind\": \"hosts\", "
                     "\"host_weights\": [3, 1, 1, 1], \"ranks_per_host\": 8, "
                     "\"keep_blocks\": true}}";
    CHECK(parse(ok, &c, err, sizeof err) == 0);
    CHECK(c.order == SIM_ORDER_HOSTS && c.n_weights == 4 && c.host_weights[0] == 3);
    CHECK(c.host_weights[3] == 1 && c.ranks_per_host == 8 && c.keep_blocks == 1);
    CHECK(sim_order_hosts(&c) == 4);
    CHECK(sim_config_set(&c, "order.host_weights", "1,2,3,4", err, sizeof err) == 0);
    CHECK(c.n_weights == 4 && c.host_weights[3] == 4);
    CHECK(sim_config_set(&c, "order.host_weights", "1,x", err, sizeof err) == -1);
    CHECK(strstr(err, "order.host_weights"));
    CHECK(sim_config_set(&c, "order", "block", err, sizeof err) == 0 && c.order == 0);
    CHECK(sim_config_set(&c, "order.kind", "shuffled", err, sizeof err) == -1);
    CHECK(strstr(err, "order.kind") && strstr(err, "block or hosts"));
    CHECK(sim_config_set(&c, "order.ranks_per_host", "4", err, sizeof err) == 0);
    CHECK(sim_config_set(&c, "order", "hosts", err, sizeof err) == 0);
    CHECK(sim_config_check(&c, "x", err, sizeof err) == -1); /* 4 weights, 8 hosts */
    CHECK(strstr(err, "order.host_weights") && strstr(err, "8 hosts"));
    refused("{\"preset\": \"this-machine\", \"order\": {\"kind\": \"random\"}}",
            "key order.kind: block or hosts");
    refused("{\"preset\": \"this-machine\", \"order\": {\"kind\": 2}}", "key order.kind");
    refused("{\"preset\": \"design-cluster\", \"order\": {\"kind\": \"hosts\", "
            "\"host_weights\": [1, 2]}}", "key order.host_weights: 2 weights for the order's 4");
    refused("{\"preset\": \"design-cluster\", \"order\": {\"kind\": \"hosts\", "
            "\"host_weights\": [0]}}", "key order.host_weights: every weight is 0");
    refused("{\"preset\": \"design-cluster\", \"order\": {\"kind\": \"hosts\", "
            "\"host_weights\": [1, -1, 1, 1]}}", "key order.host_weights: a list of whole");
    refused("{\"preset\": \"design-cluster\", \"order\": {\"kind\": \"hosts\", "
            "\"host_weights\": [1.5]}}", "key order.host_weights");
    refused("{\"preset\": \"design-cluster\", \"order\": {\"kind\": \"hosts\", "
            "\"host_weights\": \"3,1\"}}", "key order.host_weights");
    refused("{\"preset\": \"design-cluster\", \"order\": {\"kind\": \"hosts\", "
            "\"ramp\": true}}", "key order.ramp: the hosts order has no ramp");
    refused("{\"preset\": \"design-cluster\", \"hosts\": 64, \"gpus_per_host\": 64, "
            "\"order\": {\"kind\": \"hosts\", \"ranks_per_host\": 1}}",
            "key order.ranks_per_host: 4096 ranks in hosts of 1 are 4096 hosts; at most 64");
    refused("{\"preset\": \"this-machine\", \"order\": {\"kind\": \"block\", "
            "\"host_weights\": [1]}}", "key order.host_weights: for order.kind hosts");
    refused("{\"preset\": \"this-machine\", \"order\": {\"keep_blocks\": true}}",
            "key order.keep_blocks: for order.kind hosts");
    refused("{\"preset\": \"this-machine\", \"order\": {\"kind\": \"hosts\", "
            "\"keep_blocks\": 1}}", "key order.keep_blocks: true or false");
}

static void test_refused(void)
{
    char buf[1200];
    refused("{\"preset\": \"this-machine\", \"order\": {\"windw\": 4}}", "unknown key order.windw");
    refused("{\"preset\": \"this-machine\", \"ordr\": {\"window\": 4}}", "unknown key ordr");
    refused("{\"preset\": \"this-machine\", \"colour\": 4}", "unknown key colour");
    with_tiers(buf, sizeof buf, "0", "true");
    refused(buf, "tiers[1].bandwidth");
    with_tiers(buf, sizeof buf, "-5e9", "true");
    refused(buf, "tiers[1].bandwidth");
    with_tiers(buf, sizeof buf, "1e9", "false");
    refused(buf, "no tier is home");
    refused("{\"preset\": \"this-machine\", \"tiers\": [{\"name\": \"d\", \"kind\": \"dram\", "
            "\"capacity\": 1e9, \"bandwidth\": 1e9, \"concurrency\": 1}, {\"name\": \"n\", "
            "\"kind\": \"nvme\", \"capacity\": 1e6, \"bandwidth\": 1e9, \"concurrency\": 1, "
            "\"home\": true}]}",
            "tiers[1].capacity");
    refused("{\"preset\": \"this-machine\", \"tiers\": [{\"name\": \"d\", \"kind\": \"dram\", "
            "\"capacity\": 1e9, \"bandwidth\": 1e9, \"speed\": 1}]}",
            "tiers[0].speed");
    refused("{\"preset\": \"this-machine\", \"tiers\": [{\"kind\": \"tape\"}]}", "tiers[0].kind");
    refused("{\"preset\": \"this-machine\", \"hosts\": \"four\"}", "key hosts");
    refused("{\"preset\": \"this-machine\", \"hosts\": 0}", "key hosts");
    refused("{\"preset\": \"this-machine\", \"rank\": {\"batch\": 2.5}}", "rank.batch");
    refused("{\"preset\": \"this-machine\", \"policy\": \"belady\"}", "key policy");
    refused("{\"preset\": \"mainframe\"}", "key preset");
    refused("{\"preset\": \"this-machine\", \"seed\": 1, \"seed\": 2}", "duplicate key");
    refused("{\"preset\": \"this-machine\",\n \"seed\": 1,,}", "line 2");
    refused("[1, 2]", "a JSON object");
    refused("{\"preset\": \"this-machine\"} x", "text after");
    refused("", "end of text");
    /* nested deeper than the reader goes */
    char deep[200];
    memset(deep, '[', 100);
    deep[100] = '\0';
    refused(deep, "nested deeper");
    /* a string with escapes, decoded */
    struct json *j = NULL;
    char err[256];
    const char *esc = "{\"k\": \"a\\u00e9\\ud83d\\ude00\\n\\\"\"}";
    CHECK(json_parse(esc, strlen(esc), &j, err, sizeof err) == 0);
    CHECK(strcmp(json_get(j, "k")->str, "a\xc3\xa9\xf0\x9f\x98\x80\n\"") == 0);
    json_free(j);
}

/* A seed is a configuration that passes the checks and is simulated (one
 * run counted); any other file (a finding) is refused before a run. */
static void replay_one(const char *name, const uint8_t *buf, size_t len, void *ctx)
{
    (void)ctx;
    unsigned before = fuzz_runs;
    CHECK(LLVMFuzzerTestOneInput(buf, len) == 0);
    if (strncmp(name, "seed-", 5) == 0)
        CHECK(fuzz_runs == before + 1);
    else
        CHECK(fuzz_runs == before);
}

static void replay(void)
{
    CHECK(test_corpus_each(__FILE__, "fuzz_simconfig", 1 << 16, replay_one, NULL) >= 5);
}

int main(void)
{
    test_presets_and_keys();
    test_hosts_keys();
    test_refused();
    replay();
    printf("test_sim_config: ok\n");
    return 0;
}
