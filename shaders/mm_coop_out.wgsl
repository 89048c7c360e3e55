// mm_coop.wgsl's output for one product: y[r, n_off + c] (b.x = n_off, b.y =
// y's row stride).
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn coop_put(r: u32, c: u32, v: f32) {
    y[r * p.b.y + p.b.x + c] = v;
}
