from pulse_ml.cli import main

if __name__ == "__main__":
    main()
