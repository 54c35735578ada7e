/* A hostile process for the loader that follows a process's libraries:
 * maps many files and keeps them mapped, then maps and unmaps one file
 * over and over.
 *
 *   map_many DIR FILES LOOPS
 *
 * Reads a line on stdin, then creates FILES files of one page in DIR and
 * maps each (all kept mapped), maps and unmaps DIR/again LOOPS times,
 * prints "done", and exits at the end of its input. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *map_file(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        exit(1);
    void *at = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (at == MAP_FAILED)
        exit(1);
    return at;
}

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    char line[64], path[4096];
    if (!fgets(line, sizeof line, stdin))
        return 2;
    long files = atol(argv[2]), loops = atol(argv[3]);
    for (long i = 0; i < files; i++) {
        snprintf(path, sizeof path, "%s/f%ld", argv[1], i);
        map_file(path);
    }
    snprintf(path, sizeof path, "%s/again", argv[1]);
    for (long i = 0; i < loops; i++)
        munmap(map_file(path), 4096);
    printf("done\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin))
        ;
    return 0;
}
