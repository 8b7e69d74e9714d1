//===- FlashAttrs.td - mask kinds of flash.attention -------*- tablegen -*-===//
#ifndef FLASH_ATTRS
#define FLASH_ATTRS

include "flash/Dialect/Flash/IR/FlashDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Flash_MaskKind : I32EnumAttr<"MaskKind", "structured attention mask", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Causal", 1, "causal">,
    I32EnumAttrCase<"SlidingWindow", 2, "sliding_window">]> {
  let cppNamespace = "::mlir::flash";
  let genSpecializedAttr = 0;
}

def Flash_MaskAlignment : I32EnumAttr<"MaskAlignment",
    "where the diagonal of a causal mask sits when Lq != Lk", [
    I32EnumAttrCase<"TopLeft", 0, "top_left">,
    I32EnumAttrCase<"BottomRight", 1, "bottom_right">]> {
  let cppNamespace = "::mlir::flash";
  let genSpecializedAttr = 0;
}

def Flash_MaskAttr : AttrDef<Flash_Dialect, "Mask"> {
  let mnemonic = "mask";
  let summary = "structured mask of flash.attention";
  let description = [{
    A mask that is a property of the indices, not data, so that code
    generation can skip whole tiles. Query row `i` may attend key column `j`
    when, with `off = 0` for `top_left` and `off = Lk - Lq` for
    `bottom_right`:

    - `none`: always;
    - `causal`: `j <= i + off`;
    - `sliding_window, W`: `i + off - W < j <= i + off` (the last `W` keys
      up to and including the diagonal).

    ```mlir
    #flash.mask<none>
    #flash.mask<causal>                       // top_left
    #flash.mask<causal, bottom_right>
    #flash.mask<sliding_window, 4096, bottom_right>
    ```
  }];
  let parameters = (ins
    "::mlir::flash::MaskKind":$kind,
    DefaultValuedParameter<"int64_t", "0">:$window,
    DefaultValuedParameter<"::mlir::flash::MaskAlignment",
                           "::mlir::flash::MaskAlignment::TopLeft">:$alignment);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isNone() const { return getKind() == MaskKind::None; }
    bool isBottomRight() const {
      return getAlignment() == MaskAlignment::BottomRight;
    }
    /// The mask's rule, the one every lowering and cost model derives its
    /// element predicates, tile ranges and walk lengths from: with the
    /// diagonal j == i + off, query i sees key j iff
    /// i + off - keysBehindDiagonal() <= j <= i + off. nullopt bounds
    /// nothing below (causal); `none` bounds neither side.
    std::optional<int64_t> keysBehindDiagonal() const {
      if (getKind() == MaskKind::SlidingWindow)
        return getWindow() - 1;
      return std::nullopt;
    }
    /// `off` for static lengths: Lk - Lq bottom-right, 0 top-left.
    int64_t diagonalOffset(int64_t lq, int64_t lk) const {
      return isBottomRight() ? lk - lq : 0;
    }
    /// How many keys of [0, lk) query row i sees (static lengths).
    int64_t visibleKeyCount(int64_t i, int64_t lq, int64_t lk) const;
  }];
}

#endif // FLASH_ATTRS
