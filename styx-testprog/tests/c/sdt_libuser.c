/* Fires USDT probes in three files: its own (provider sdtmain), the library
 * it links (sdtlib), and one it dlopens at start (argv[1], provider sdtdl).
 * Prints each event it fired as a JSON line. Says "ready" once the library
 * is loaded, then reads commands on stdin:
 *   fire N   N rounds of main, lib and dl probes, then "done"
 *            (rounds are numbered on from the previous command)
 *   close    dlclose the dlopened library (unmapped while traced), "closed"
 *   main N   N rounds of main probes only, then "done"
 * and exits at end of input. */
#define _SDT_HAS_SEMAPHORES 1
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/sdt.h>

unsigned short sdtmain_tick_semaphore __attribute__((unused, section(".probes")));

void sdtlib_fire(int round);

static void tick(int round) {
    if (sdtmain_tick_semaphore) {
        DTRACE_PROBE1(sdtmain, tick, round);
        printf("{\"provider\":\"sdtmain\",\"probe\":\"tick\",\"args\":[%d]}\n", round);
    }
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    void *dl = dlopen(argv[1], RTLD_NOW);
    if (!dl) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    void (*dl_fire)(int) = (void (*)(int))dlsym(dl, "sdtdl_fire");
    if (!dl_fire)
        return 1;
    printf("ready\n");
    fflush(stdout);
    char command[16];
    int rounds, next_round = 0; /* every round number is used once */
    while (scanf("%15s", command) == 1) {
        if (strcmp(command, "close") == 0) {
            dlclose(dl);
            dl_fire = NULL;
            printf("closed\n");
        } else if (scanf("%d", &rounds) == 1) {
            for (int n = 0; n < rounds; n++) {
                int round = next_round++;
                tick(round);
                if (strcmp(command, "fire") == 0) {
                    sdtlib_fire(round);
                    if (dl_fire)
                        dl_fire(round);
                }
            }
            printf("done\n");
        }
        fflush(stdout);
    }
    return 0;
}
