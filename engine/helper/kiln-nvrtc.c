/* kiln-nvrtc, the compile helper: a program of its own so that NVRTC sits at the same addresses
 * in every run (engine/src/remote.c says why, and does the work). */
#include "../src/remote.h"

int main(int argc, char **argv) { return kiln__remote_main(argc, argv); }
