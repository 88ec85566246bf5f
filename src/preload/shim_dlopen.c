/* The exported dlopen, a jump into the C library's (see below). */
#include <dlfcn.h>

#include "../exec/dlopen.h"
#include "shim.h"

/* dlopen: executable text on large folios (src/exec/dlopen.h). glibc's
 * dlopen takes its caller from its own return address and resolves
 * $ORIGIN, RUNPATH and the namespace against that object: so the exported
 * dlopen below is a jump, not a call. It saves the arguments, calls
 * hz_shim_dlopen_prepare (hugezero's part, done before the load), and
 * jumps to the real dlopen with the program's return address still on
 * the stack, which returns straight to the program. A C tail call would
 * do the same only when the compiler makes it one, which -O0 does not.
 * The mode is applied to the new objects later (dlopen.h). */
static void *real_dlopen;

HIDDEN void *hz_shim_dlopen_prepare(const char *file, int flags);

static void *no_dlopen(const char *file, int flags)
{
	(void)file;
	(void)flags;
	return NULL;
}

void *hz_shim_dlopen_prepare(const char *file, int flags)
{
	void *fn = hz_shim_next_once(&real_dlopen, "dlopen");

	if (fn == NULL) /* no C library's dlopen after us: fail as a load would */
		return (void *)no_dlopen;
	hz_exec_dlopen_begin(file, flags);
	return fn;
}

/* endbr64 and bti c are hints, executed as no-ops where branch tracking
 * is off; the stack stays 16-byte aligned at the call. */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlopen\n"
	".type dlopen, @function\n"
	".p2align 4\n"
	"dlopen:\n"
	".cfi_startproc\n"
	"endbr64\n"
	"push %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"push %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"sub $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"call hz_shim_dlopen_prepare\n"
	"add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"jmp *%rax\n"
	".cfi_endproc\n"
	".size dlopen, .-dlopen\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlopen\n"
	".type dlopen, %function\n"
	".p2align 4\n"
	"dlopen:\n"
	".cfi_startproc\n"
	"hint #34\n" /* bti c */
	"stp x29, x30, [sp, #-32]!\n"
	".cfi_def_cfa_offset 32\n"
	".cfi_offset 29, -32\n"
	".cfi_offset 30, -24\n"
	"mov x29, sp\n"
	"stp x0, x1, [sp, #16]\n"
	"bl hz_shim_dlopen_prepare\n"
	"mov x16, x0\n"
	"ldp x0, x1, [sp, #16]\n"
	"ldp x29, x30, [sp], #32\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	".cfi_def_cfa_offset 0\n"
	"br x16\n"
	".cfi_endproc\n"
	".size dlopen, .-dlopen\n");
#else
#error "the dlopen jump is written for x86_64 and aarch64"
#endif
