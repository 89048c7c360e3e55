// mm_coop.wgsl's output for one weight holding the Q rows, then the K rows,
// then the V rows (c.y = first K row, c.z = first V row): output column c
// goes to the one of yq, yk, yv it belongs to, each a dense [M, its rows].
@group(0) @binding(2) var<storage, read_write> yq: array<f32>;
@group(0) @binding(3) var<storage, read_write> yk: array<f32>;
@group(0) @binding(4) var<storage, read_write> yv: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

fn coop_put(r: u32, c: u32, v: f32) {
    if c < p.c.y {
        yq[r * p.c.y + c] = v;
    } else if c < p.c.z {
        yk[r * (p.c.z - p.c.y) + c - p.c.y] = v;
    } else {
        yv[r * (p.a.y - p.c.z) + c - p.c.z] = v;
    }
}
