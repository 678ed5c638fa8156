print("benchmark in progress")
