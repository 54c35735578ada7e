/* A guest program for styx-qemu's end-to-end tests, built static for
 * x86-64 and AArch64 and run under qemu-user with the plugin. `touch` is
 * a loop of known instructions and accesses, so the tests know exactly
 * what it executes: per round a load of 8 bytes at buf, a store of 4 at
 * buf+8, a load of 1 at buf+16, a store of 2 at buf+18, a decrement and a
 * branch; then one return. Usage: qemu_guest ROUNDS [wait]; with `wait`
 * it runs the loop, says "waiting", reads lines from stdin (system calls),
 * answering "pong" to each until one is "go", and runs the loop again: a
 * tracer attached meanwhile finds the loop already translated without its
 * callbacks. With `threads` two
 * threads run the loop, each on its own buffer, after meeting at a
 * barrier (so both live at once: QEMU gives a vCPU index of an exited
 * thread to the next), and the main thread joins them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned char buf[64];
void touch(long rounds, unsigned char *p);
extern char touch_end[];

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl touch\n"
        ".type touch, @function\n"
        "touch:\n"
        "1: movq (%rsi), %rax\n"
        "   movl %eax, 8(%rsi)\n"
        "   movb 16(%rsi), %al\n"
        "   movw %ax, 18(%rsi)\n"
        "   dec %rdi\n"
        "   jnz 1b\n"
        "   ret\n"
        ".globl touch_end\n"
        "touch_end:\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl touch\n"
        ".type touch, %function\n"
        "touch:\n"
        "1: ldr x2, [x1]\n"
        "   str w2, [x1, #8]\n"
        "   ldrb w2, [x1, #16]\n"
        "   strh w2, [x1, #18]\n"
        "   subs x0, x0, #1\n"
        "   b.ne 1b\n"
        "   ret\n"
        ".globl touch_end\n"
        "touch_end:\n");
#else
#error "x86-64 or AArch64"
#endif

static unsigned char thread_bufs[2][64];
static long thread_rounds;
static pthread_barrier_t both;

static void *thread_main(void *buf) {
    pthread_barrier_wait(&both);
    touch(thread_rounds, buf);
    return NULL;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    printf("touch=%p end=%p buf=%p\n", (void *)touch, (void *)touch_end, (void *)buf);
    fflush(stdout);
    if (argc > 2 && strcmp(argv[2], "threads") == 0) {
        pthread_t threads[2];
        thread_rounds = rounds;
        pthread_barrier_init(&both, NULL, 2);
        for (int i = 0; i < 2; i++)
            if (pthread_create(&threads[i], NULL, thread_main, thread_bufs[i]))
                return 1;
        for (int i = 0; i < 2; i++)
            pthread_join(threads[i], NULL);
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "wait") == 0) {
        char line[16];
        touch(rounds, buf);
        printf("waiting\n");
        fflush(stdout);
        for (;;) {
            if (!fgets(line, sizeof line, stdin))
                return 1;
            if (strcmp(line, "go\n") == 0)
                break;
            printf("pong\n");
            fflush(stdout);
        }
    }
    touch(rounds, buf);
    return 0;
}
