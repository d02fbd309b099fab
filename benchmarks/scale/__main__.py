from benchmarks.scale.run import main

main()
