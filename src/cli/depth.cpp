// cli/depth.cpp — the single-file CLAHE / 16-bit path (cli/depth.hpp) over histeq/item.hpp.
#include "cli/depth.hpp"

namespace histeq::cli {

bool needs_item_op(const ItemOpOptions& opt, bool input_is_16bit) {
  return opt.op.kind == OpKind::clahe || opt.op.kind == OpKind::match ||
         !opt.op.equalize.region.all() || input_is_16bit || opt.op.depth == 16;
}

std::vector<std::uint8_t> run_item(const ItemOpOptions& opt, const std::uint8_t* data,
                                   std::size_t size, const std::string& name,
                                   const std::string& out_ext, ItemReport& rep) {
  ItemContext ctx;
  ctx.op = opt.op;
  ctx.encode = opt.encode;
  ctx.max_pixels = opt.max_pixels;
  const ItemPlan plan = plan_item(data, size, opt.op, out_ext, opt.encode, opt.max_pixels, {});
  return histeq::run_item(ctx, plan, data, size, name, out_ext, rep);
}

}  // namespace histeq::cli
