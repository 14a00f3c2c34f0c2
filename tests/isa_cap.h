/* The capped re-runs of numerical tests (ISA_CAPS in tests/CMakeLists.txt)
 * set SCALEOUT_TEST_ISA_CAP beside SCALEOUT_MAX_ISA. On a CPU with no more
 * than that ISA the run would repeat the uncapped one: main() returns 77
 * (CTest's skip) with a line naming what is missing. */
#ifndef SO_TEST_ISA_CAP_H
#define SO_TEST_ISA_CAP_H
#include <stdio.h>
#include <stdlib.h>

#include "scaleout/cpu.h"

static inline int isa_cap_redundant(void)
{
    const char *cap = getenv("SCALEOUT_TEST_ISA_CAP");
    so_isa want;
    if (!cap || so_isa_parse(cap, &want) || so_cpu_isa_detected() > want)
        return 0;
    printf("skipped: the CPU has %s at most, so the cap to %s changes no kernel\n",
           so_isa_label(so_cpu_isa_detected()), cap);
    return 1;
}

#endif
