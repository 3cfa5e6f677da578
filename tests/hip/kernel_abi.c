/* kernel_abi.c - prints what the host side of the library assumes about the kernels' interface, for
 * tools/check_code_objects.py to hold the code objects to: the size of each kernel family's
 * by-value argument struct as the host C compiler lays it out (kernels/decode/decode_args.h, generic_args.h,
 * encoder_args.h, and prefill_args.h for the encoder's paged siblings, <variant>_paged), and
 * the workgroup size the host launches the generic kernel with. One "key=value" per line. */
#include "decode/decode_args.h"
#include "encoder/encoder_args.h"
#include "encoder/prefill_args.h"
#include "generic/generic_args.h"

#include <stdio.h>

int main(void)
{
    printf("args.decode_=%zu\n", sizeof(r35a_decode_args));
    printf("args.generic_paged_=%zu\n", sizeof(r35a_generic_paged_args));
    printf("args.generic_varlen_=%zu\n", sizeof(r35a_generic_varlen_args));
    printf("args.encoder_=%zu\n", sizeof(r35a_encoder_args));
    printf("args.encoder_*_paged=%zu\n", sizeof(r35a_prefill_args));
    printf("threads.generic_=%d\n", R35A_GENERIC_THREADS);
    return 0;
}
