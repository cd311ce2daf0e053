// IRED8(S, XS, XT): lane 0 of XS = the sum of the 8 int32 lanes of S
// (XS is S's low half; exact, wrapping like int32; XT clobbered). The
// row-sequential one- and four-vector K-quant kernels reduce a
// super-block's lanes with it before its one float FMA.
#define IRED8(S, XS, XT) \
	VEXTRACTI128 $1, S, XT    \
	VPADDD       XT, XS, XS   \
	VPSHUFD      $0x4e, XS, XT \
	VPADDD       XT, XS, XS   \
	VPSHUFD      $0xb1, XS, XT \
	VPADDD       XT, XS, XS
