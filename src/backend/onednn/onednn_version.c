/* The oneDNN version for benchmark records (environment section of the
 * --json files), so results say which kernels produced them. */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>

#include "scaleout/backend.h"

const char *so_backend_version(void)
{
    static char buf[96];
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d (%.12s)", v->major, v->minor, v->patch, v->hash ? v->hash : "?");
    return buf;
}
