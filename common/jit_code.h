/*
 * jit_code.h - names for JIT-compiled code, from the process's jitdump file.
 *
 * JIT code lives in anonymous memory: no module, no symbol.  LLVM's perf
 * listener (PostgreSQL turns it on with jit_profiling_support) appends a
 * record per compiled function to a jitdump file, "jit-<pid>.dump", and
 * maps that file into the process as a marker for perf.  So the file is
 * found in /proc/self/maps, and its JIT_CODE_LOAD records (address, size,
 * name) name the code.  PostgreSQL's JIT names are numbered per module
 * (evalexpr_3_1, deform_3_0); the numbers say nothing across statements
 * and would grow without bound, so names are kept without them.
 */
#ifndef TP_JIT_CODE_H
#define TP_JIT_CODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tp_jit_code tp_jit_code;

tp_jit_code *tp_jit_code_new(void);

/*
 * Read the records appended since the last call (finding the file first,
 * if it exists yet); returns how many functions were added.  Not
 * async-signal-safe.
 */
size_t		tp_jit_code_refresh(tp_jit_code *jit);

/*
 * The name of the most recently loaded code covering pc ("evalexpr"), or
 * NULL.  Code is freed and its addresses reused; the latest load wins.
 */
const char *tp_jit_code_lookup(const tp_jit_code *jit, uintptr_t pc);

void		tp_jit_code_free(tp_jit_code *jit);

#endif
