from kidata.cli import main

# Guarded: worker processes of a load (spawned) import the main module again.
if __name__ == "__main__":
    main()
