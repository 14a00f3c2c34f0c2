/* The --sync grammar (scaleout/sync.h): every method with its parameter
 * reads back from its own formatting, and bad specs fail with SO_EINVAL and
 * one line naming --sync and what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/sync.h"

static void round_trips(const char *text, so_sync_method method)
{
    so_sync_spec s, again;
    assert_int_equal(so_sync_parse(text, &s), 0);
    assert_int_equal(s.method, method);
    char buf[64];
    so_sync_format(&s, buf, sizeof buf);
    assert_string_equal(buf, text);
    assert_int_equal(so_sync_parse(buf, &again), 0);
    assert_memory_equal(&s, &again, sizeof s);
}

static void test_good(void **state)
{
    (void)state;
    round_trips("sync", SO_SYNC_SYNC);
    round_trips("local:8", SO_SYNC_LOCAL);
    round_trips("diloco:500", SO_SYNC_DILOCO);
    round_trips("ssp:0", SO_SYNC_SSP);
    round_trips("ssp:3", SO_SYNC_SSP);
    round_trips("async", SO_SYNC_ASYNC);
    round_trips("gossip:ring", SO_SYNC_GOSSIP);
    round_trips("gossip:torus", SO_SYNC_GOSSIP);
    so_sync_spec s;
    assert_int_equal(so_sync_parse("local:1", &s), 0);
    assert_int_equal(s.period, 1);
    assert_int_equal(so_sync_parse("ssp:5", &s), 0);
    assert_int_equal(s.staleness, 5);
    assert_true(so_sync_uses_ps(&s));
    assert_int_equal(so_sync_parse("gossip:torus", &s), 0);
    assert_int_equal(s.topology, SO_GOSSIP_TORUS);
    assert_false(so_sync_uses_ps(&s));
}

/* Fails with SO_EINVAL, and the message names the flag and contains `what`. */
static void refused(const char *text, const char *what)
{
    so_sync_spec s;
    assert_int_equal(so_sync_parse(text, &s), SO_EINVAL);
    const char *msg = so_errmsg();
    if (strncmp(msg, "--sync: ", 8) || !strstr(msg, what) || strchr(msg, '\n'))
        fail_msg("'%s': message '%s' lacks '%s'", text, msg, what);
}

static void test_bad(void **state)
{
    (void)state;
    refused("", "empty method");
    refused("lokal:8", "unknown method");
    refused("sync:2", "takes no parameter");
    refused("async:1", "takes no parameter");
    refused("local", "needs the period H");
    refused("local:", "not an integer");
    refused("local:0", "outside 1..");
    refused("local:8x", "not an integer");
    refused("diloco:-3", "outside 1..");
    refused("ssp", "needs the staleness bound S");
    refused("ssp:-1", "outside 0..");
    refused("ssp:99999999999999999999", "not an integer");
    refused("gossip", "gossip:ring or gossip:torus");
    refused("gossip:star", "gossip:ring or gossip:torus");
    refused("local:8\n", "not a printable character");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_good), cmocka_unit_test(test_bad)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
