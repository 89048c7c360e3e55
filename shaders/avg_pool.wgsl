// AvgPool2d of x [planes, H, W] into y [planes, Ho, Wo], one thread per output:
// the mean of the kh x kw window at (i sh - pt, j sw - pl), divided by the whole
// window when count_include_pad, else by the values inside x.
// a = (count, H, W, Ho), b = (Wo, kh, kw, sh), c = (sw, pt, pl, count_include_pad).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = flat_index(gid);
    if o >= p.a.x {
        return;
    }
    let h = i32(p.a.y);
    let w = i32(p.a.z);
    let ho = p.a.w;
    let wo = p.b.x;
    let j = o % wo;
    let i = (o / wo) % ho;
    let plane = o / (wo * ho);
    var acc = 0.0;
    var inside = 0u;
    for (var u = 0u; u < p.b.y; u++) {
        let r = i32(i * p.b.w + u) - i32(p.c.y);
        for (var v = 0u; v < p.b.z; v++) {
            let s = i32(j * p.c.x + v) - i32(p.c.z);
            if r >= 0 && r < h && s >= 0 && s < w {
                acc += x[(plane * u32(h) + u32(r)) * u32(w) + u32(s)];
                inside += 1u;
            }
        }
    }
    let count = select(max(inside, 1u), p.b.y * p.b.z, p.c.w == 1u);
    y[o] = acc / f32(count);
}
