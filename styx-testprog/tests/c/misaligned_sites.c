/* A hostile target for the loader's site checks: USDT notes and function
 * symbols that point into the middle of instructions, written by hand as
 * styx-probe writes its notes (probes/src/site.rs), and one note whose site
 * no function symbol covers. A uprobe at any of the bad places would write
 * an int3 (0xcc) into an instruction's immediate, and the functions below
 * would return something else: the program prints what they return.
 *
 *   imm_site   movl $0x90909090,%eax; ret   note hostile:inside at imm_site+1
 *                                           (a 0x90 byte: passes a nop check)
 *   f          movl $0x90c3c3c3,%eax; ret
 *   g = f+1    size 4: c3 c3 c3 90, "three rets" inside f's immediate
 *   ok_site    nop; movl $7,%eax; ret       note hostile:ok at ok_site
 *   loose_site nop; movl $5,%eax; ret       note hostile:loose, a label with
 *                                           no function symbol around it
 *
 * Reads "go N" on stdin, calls each N times, prints one line of results. */
#include <stdio.h>

/* One stapsdt note (type 3, owner "stapsdt"): pc, .stapsdt.base, no
 * semaphore, provider, name, no arguments. */
#define NOTE(pc, provider, name)                                              \
    ".pushsection .note.stapsdt,\"\",\"note\"\n"                              \
    ".balign 4\n"                                                             \
    ".4byte 992f-991f, 994f-993f, 3\n"                                        \
    "991: .asciz \"stapsdt\"\n"                                               \
    "992: .balign 4\n"                                                        \
    "993: .8byte " pc "\n"                                                    \
    ".8byte _.stapsdt.base\n"                                                 \
    ".8byte 0\n"                                                              \
    ".asciz \"" provider "\"\n"                                               \
    ".asciz \"" name "\"\n"                                                   \
    ".asciz \"\"\n"                                                           \
    "994: .balign 4\n"                                                        \
    ".popsection\n"

__asm__(".pushsection .stapsdt.base,\"aG\",@progbits,.stapsdt.base,comdat\n"
        ".weak _.stapsdt.base\n"
        ".hidden _.stapsdt.base\n"
        "_.stapsdt.base: .space 1\n"
        ".size _.stapsdt.base, 1\n"
        ".popsection\n"

        ".text\n"
        ".globl imm_site\n"
        ".type imm_site,@function\n"
        "imm_site:\n"
        "    movl $0x90909090, %eax\n"
        "    ret\n"
        ".size imm_site, .-imm_site\n"
        NOTE("imm_site+1", "hostile", "inside")

        ".globl f\n"
        ".type f,@function\n"
        "f:\n"
        "    movl $0x90c3c3c3, %eax\n"
        "    ret\n"
        ".size f, .-f\n"
        ".globl g\n"
        ".type g,@function\n"
        ".set g, f+1\n"
        ".size g, 4\n"

        ".globl ok_site\n"
        ".type ok_site,@function\n"
        "ok_site:\n"
        "    nop\n"
        "    movl $7, %eax\n"
        "    ret\n"
        ".size ok_site, .-ok_site\n"
        NOTE("ok_site", "hostile", "ok")

        ".globl loose_site\n"
        "loose_site:\n"
        "    nop\n"
        "    movl $5, %eax\n"
        "    ret\n"
        NOTE("loose_site", "hostile", "loose"));

unsigned imm_site(void);
unsigned f(void);
unsigned ok_site(void);
unsigned loose_site(void);

int main(void) {
    int n;
    puts("ready");
    fflush(stdout);
    while (scanf("%*s %d", &n) == 1) {
        unsigned imm = 0, fv = 0, ok = 0, loose = 0;
        for (int i = 0; i < n; i++) {
            imm = imm_site();
            fv = f();
            ok = ok_site();
            loose = loose_site();
        }
        printf("imm=%#x f=%#x ok=%u loose=%u\n", imm, fv, ok, loose);
        fflush(stdout);
    }
    return 0;
}
