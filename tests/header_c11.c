/* header_c11.c - the public header compiles alone as strict C11 (-std=c11 -Wpedantic) and its
 * declarations link against the library. No other include on purpose. */
#include "rdna35attn.h"

int main(void)
{
    r35a_paged_attention_desc pd;
    r35a_varlen_attention_desc vd;
    r35a_paged_attention_desc_init(&pd, R35A_DTYPE_F16, 1, 1, 1, 1, 1, 1, 64, 16, 1);
    r35a_varlen_attention_desc_init(&vd, R35A_DTYPE_BF16, 1, 1, 1, 1, 1, 64);
    if (pd.struct_size != sizeof pd || vd.struct_size != sizeof vd) {
        return 1;
    }
    return r35a_version_number() == (unsigned)R35A_VERSION_NUMBER ? 0 : 1;
}
