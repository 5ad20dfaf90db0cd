/* kiln — the command-line program. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kiln: not yet\n");
    return 1;
}
