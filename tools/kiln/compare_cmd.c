/* `kiln compare` — placeholder until written below. */
#include "cli.h"
int kn_cmd_compare(int argc, char **argv) { (void)argc, (void)argv; return 2; }
