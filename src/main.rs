fn main() {
    println!("gpulab");
}
