/* scaleout command-line entry point (placeholder until the subcommands land). */
#include <stdio.h>
int main(void) { puts("scaleout"); return 0; }
